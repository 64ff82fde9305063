-- Stored graphs (issue 10, `flow graph set|ls|show|rm`): a project's named flowsvc-graph/v1
-- documents. `document` is the parsed graph as core's parseGraph answered it; `source` is the JSON
-- text a run of the graph carries (runs.source), so a run keeps the graph it started with even when
-- the stored one is replaced or removed. A draft is stored even before its credentials exist.
create table graphs (
  project_id  text not null references projects(id) on delete cascade,
  name        text not null,
  document    jsonb not null,
  source      text not null,
  created_by  text references users(id) on delete set null,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now(),
  primary key (project_id, name)
);

-- A graph's own ingest endpoints: one per `trigger` or `webhook` node (spec, "Inbound hook and
-- trigger-node choice": it lives and dies with its graph). Created when a graph with such a node is
-- saved, removed with the node or the graph (the cascade). As with event hooks, only the shared
-- secret's digest is kept; the secret is shown once, by the save that created the endpoint.
create table graph_endpoints (
  project_id     text not null,
  graph_name     text not null,
  node_id        text not null,
  kind           text not null check (kind in ('trigger', 'webhook')),
  event_type     text not null,                 -- graph.<graph>.<node>.<config.event_type, default delivery>
  secret_digest  bytea not null,
  created_at     timestamptz not null default now(),
  primary key (project_id, graph_name, node_id),
  foreign key (project_id, graph_name) references graphs (project_id, name) on delete cascade
);
