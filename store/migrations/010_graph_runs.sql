-- Graph runs (issue 10, item 2). A graph run is a runs row with workflow 'flowsvc-graph/v1' whose
-- source is the graph's JSON; it has no script job. What it was given at submit (the JSON input, or
-- the event envelope of a handler run) is its input. Each node's state is a graph_nodes row that the
-- controller's graph driver (controller/src/graph/driver.ts) writes under the run row's lock, and
-- commits before any node that depends on it starts: a server killed mid-graph never runs a
-- finished node again.
alter table runs add column input jsonb;

create table graph_nodes (
  run_id        text not null references runs(id) on delete cascade,
  node_id       text not null,
  type          text not null,
  ord           integer not null,                     -- the node's index in the document
  status        text not null default 'pending'
                check (status in ('pending', 'running', 'parked', 'success', 'failed', 'skipped', 'cancelled')),
  attempt       integer not null default 0,           -- 1-based once started
  retry         jsonb,                                -- {attempts, backoff_ms}, from the document
  not_before    timestamptz,                          -- a retry's backoff: not started before
  output        jsonb,
  error         text,
  -- How the running attempt runs: 'inline' (an executor in the driver's process, at least once),
  -- 'job' (an agent job of the run: code and shell nodes), 'child' (a child run), 'wait' (parked).
  mode          text,
  owner         text,                                 -- the driver process of an inline attempt
  job_id        text,
  job           jsonb,                                -- a code/shell node's job: source, interpreter, credentials map
  child_run_id  text,
  wait_position integer,                              -- a parked node's journal wait entry
  substate      jsonb,                                -- a parked node's {name, kind} (+ prompt and fields of an approval)
  started_at    timestamptz,
  finished_at   timestamptz,
  primary key (run_id, node_id)
);
create index graph_nodes_retry_due on graph_nodes (not_before) where status = 'pending' and not_before is not null;
create index graph_nodes_child on graph_nodes (child_run_id) where child_run_id is not null;

-- An emit node's event, once per (run, node, attempt): a replayed attempt answers the recorded id.
create table graph_node_emits (
  run_id    text not null references runs(id) on delete cascade,
  node_id   text not null,
  attempt   integer not null,
  event_id  text not null,
  primary key (run_id, node_id, attempt)
);

-- A code or shell node runs as a job of its graph run, kind 'node'.
alter table jobs drop constraint jobs_kind_check;
alter table jobs add constraint jobs_kind_check check (kind in ('run', 'activity', 'node'));
alter table jobs add column node_id text;
