-- The event bus (issue 4): handlers, inbound hooks, forge delivery dedup, event waits.

-- Forge-shaped scalar fields (sha, ref, repo, ...), where the event came from, and whether its
-- runs may see secrets. A forge delivery id dedups redeliveries: one bus row per delivery.
alter table events add column fields jsonb;
alter table events add column hook_name text;
alter table events add column delivery_id text;
alter table events add column trusted boolean not null default true;
create unique index events_delivery on events (project_id, hook_name, delivery_id) where delivery_id is not null;

-- A handler: patterns, an optional CEL predicate and a script reaction.
create table handlers (
  project_id   text not null references projects(id) on delete cascade,
  name         text not null,
  patterns     text[] not null,
  when_cel     text,
  reaction     jsonb not null,          -- {kind: "script", source, filename}
  tags         text[] not null default '{}',
  credentials  jsonb not null default '{}',
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  primary key (project_id, name)
);

-- Runs started by an event: which handler, which event, how deep in a chain, trusted or not.
alter table runs add column handler_name text;
alter table runs add column event_id text;
alter table runs add column generation integer not null default 0;
alter table runs add column trusted boolean not null default true;
create index runs_handler_in_flight on runs (project_id) where handler_name is not null and status in ('queued', 'running', 'parked');

-- Inbound hooks. Only the shared secret's digest is kept; signing keys are sealed (they must be
-- used, not just compared).
create table event_hooks (
  project_id      text not null references projects(id) on delete cascade,
  name            text not null,
  mode            text not null check (mode in ('token', 'manifest', 'hmac')),
  event_type      text,
  manifest        text,
  secret_digest   bytea not null,
  key_sealed      bytea,
  hmac_header     text,
  hmac_prefix     text,
  created_at      timestamptz not null default now(),
  rotated_at      timestamptz,
  primary key (project_id, name)
);

-- Pending event waits are found by (kind, name) across a project's runs.
create index journal_pending_waits on journal (kind, name) where status = 'pending';
