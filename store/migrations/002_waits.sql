-- Durable waits (issue 3): timers, signals, locks, activities, state, retries.

-- A pending journal entry may have a deadline (a sleep's wake time, a bounded wait's timeout) and
-- the arguments it was made with.
alter table journal add column deadline timestamptz;
alter table journal add column args jsonb;
create index journal_pending_deadline on journal (deadline) where status = 'pending' and deadline is not null;

-- A wait resolved while the run still had a live job: the job's suspend requeues instead of parking.
alter table runs add column wake_requested boolean not null default false;
-- Where a run came from when it is a rerun.
alter table runs add column rerun_of text;

-- A job runs a script (the run) or one activity child of it.
alter table jobs add column kind text not null default 'run' check (kind in ('run', 'activity'));
alter table jobs add column activity_id text;

-- Signals are a queue per (run, name): each wait takes the oldest unclaimed one.
create table signals (
  id                bigserial primary key,
  run_id            text not null references runs(id) on delete cascade,
  name              text not null,
  payload           jsonb,
  sent_by           text,
  created_at        timestamptz not null default now(),
  claimed_position  integer
);
create index signals_unclaimed on signals (run_id, name, id) where claimed_position is null;

-- Project-scoped leases, granted FIFO in id order.
create table lock_leases (
  id           bigserial primary key,
  project_id   text not null references projects(id) on delete cascade,
  grp          text not null,
  run_id       text not null references runs(id) on delete cascade,
  position     integer not null,
  requested_at timestamptz not null default now(),
  granted_at   timestamptz,
  released_at  timestamptz,
  unique (run_id, position)
);
create index lock_leases_open on lock_leases (project_id, grp, id) where released_at is null;

-- Fan-out children of a script run.
create table activities (
  id           text primary key,
  run_id       text not null references runs(id) on delete cascade,
  name         text not null,
  position     integer not null,
  argv         text[] not null,
  requires     text[] not null default '{}',
  status       text not null check (status in ('queued', 'running', 'succeeded', 'failed')),
  exit_code    integer,
  stdout_b64   text,
  error        text,
  collected    boolean not null default false,
  created_at   timestamptz not null default now(),
  finished_at  timestamptz,
  unique (run_id, name)
);

-- `flow state`: run-private (scope 'run:<id>') or project-wide entities (scope 'entity:<name>').
create table state_cells (
  project_id  text not null references projects(id) on delete cascade,
  scope       text not null,
  key         text not null,
  value       jsonb,
  updated_at  timestamptz not null default now(),
  primary key (project_id, scope, key)
);
