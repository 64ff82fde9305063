-- flowsvc schema, version 1: tenancy, auth, secrets, runs, jobs, the journal, logs, events.

create table orgs (
  id          text primary key,
  name        text not null unique,
  created_at  timestamptz not null default now()
);

-- The org's data key, wrapped (AES-256-GCM) by the server master key. See core/src/seal.ts.
create table org_keys (
  org_id      text primary key references orgs(id) on delete cascade,
  wrapped     bytea not null,
  created_at  timestamptz not null default now()
);

create table projects (
  id          text primary key,
  org_id      text not null references orgs(id) on delete cascade,
  name        text not null,
  created_at  timestamptz not null default now(),
  unique (org_id, name)
);

create table users (
  id          text primary key,
  name        text not null unique,
  created_at  timestamptz not null default now()
);

-- Bearer API tokens: only the SHA-256 digest of the token is kept.
create table api_tokens (
  id            text primary key,
  user_id       text not null references users(id) on delete cascade,
  digest        bytea not null unique,
  label         text not null default '',
  created_at    timestamptz not null default now(),
  last_used_at  timestamptz
);

create table memberships (
  project_id  text not null references projects(id) on delete cascade,
  user_id     text not null references users(id) on delete cascade,
  role        text not null check (role in ('viewer', 'member', 'admin')),
  primary key (project_id, user_id)
);

-- Write-only values: sealed with the org key; the AAD binds (version, org, project, kind, name).
create table secrets (
  project_id  text not null references projects(id) on delete cascade,
  name        text not null,
  sealed      bytea not null,
  set_at      timestamptz not null default now(),
  primary key (project_id, name)
);

create table runs (
  id               text primary key,
  project_id       text not null references projects(id) on delete cascade,
  workflow         text not null,                 -- flowsvc/script/v1
  status           text not null check (status in ('queued', 'running', 'parked', 'succeeded', 'failed', 'cancelled')),
  substate         jsonb,                         -- {name, kind} of the most recent parked activity
  deadline         timestamptz,
  source           text not null,                 -- the run's own recorded copy of the source
  filename         text not null,
  interpreter      text[] not null,
  env              jsonb not null default '{}',   -- workflow env (flow submit --env), never secrets
  tags             text[] not null default '{}',
  trigger          jsonb not null,
  idempotency_key  text,
  retry            jsonb,                         -- {attempts, backoff_ms}
  attempt          integer not null default 1,
  parent_run_id    text,
  created_by       text references users(id) on delete set null,
  output           jsonb,
  error            text,
  annotations      jsonb not null default '[]',
  created_at       timestamptz not null default now(),
  started_at       timestamptz,
  finished_at      timestamptz,
  unique (project_id, idempotency_key)
);
create index runs_project_created on runs (project_id, created_at desc);
create index runs_project_status on runs (project_id, status);

-- One row per dispatch of a run. A job is claimed by the controller with SKIP LOCKED, handed to an
-- agent with a token whose digest is kept here, and kept alive by the agent's heartbeat lease.
create table jobs (
  id                text primary key,
  run_id            text not null references runs(id) on delete cascade,
  status            text not null check (status in ('queued', 'dispatched', 'running', 'suspended', 'done', 'lost')),
  capabilities      text[] not null default '{}',
  attempt           integer not null default 0,   -- bumped at each dispatch; old tokens die with it
  token_digest      bytea,
  agent_id          text,
  lease_expires_at  timestamptz,
  not_before        timestamptz not null default now(),
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now()
);
create index jobs_ready on jobs (not_before) where status = 'queued';
create index jobs_leased on jobs (lease_expires_at) where status in ('dispatched', 'running');
create index jobs_run on jobs (run_id);
create unique index jobs_token on jobs (token_digest) where token_digest is not null;

-- The journal: one row per durable call, by position. Replay compares kind and name.
create table journal (
  run_id       text not null references runs(id) on delete cascade,
  position     integer not null,
  kind         text not null,
  name         text not null,
  ordinal      integer not null,
  status       text not null check (status in ('pending', 'done')),
  result       jsonb,
  created_at   timestamptz not null default now(),
  resolved_at  timestamptz,
  primary key (run_id, position)
);

-- Masked output, in arrival order.
create table run_logs (
  id          bigserial primary key,
  run_id      text not null references runs(id) on delete cascade,
  job_id      text,
  stream      text not null check (stream in ('stdout', 'stderr', 'system')),
  data        text not null,
  created_at  timestamptz not null default now()
);
create index run_logs_run on run_logs (run_id, id);

-- The bus: append-only.
create table events (
  seq            bigserial unique,
  id             text primary key,
  project_id     text not null references projects(id) on delete cascade,
  type           text not null,
  key            text,
  payload        jsonb,
  source_run_id  text,
  generation     integer not null default 0,
  created_at     timestamptz not null default now()
);
create index events_project_seq on events (project_id, seq desc);
create index events_project_type on events (project_id, type, seq desc);
