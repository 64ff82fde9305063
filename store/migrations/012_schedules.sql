-- Schedules (issue 11, item 3): a script run on a cron in a time zone. The controller's timer loop
-- claims a due row (next_fire_at <= now, not paused) with FOR UPDATE SKIP LOCKED and, in one
-- transaction, records a schedule.tick event, submits the run and moves next_fire_at to the first
-- match after now (store/src/schedules.ts `fireDueSchedules`): two controllers never fire one tick,
-- and a server that was down over several ticks fires once.
create table schedules (
  id             text primary key,              -- sch-...: CI_TRIGGER_SCHEDULE of its runs
  project_id     text not null references projects(id) on delete cascade,
  name           text not null,
  cron           text not null,                 -- normalised by core/src/cron.ts parseCron
  time_zone      text not null,                 -- canonical IANA name (parseTimeZone)
  reaction       jsonb not null,                -- {kind: "script", source, filename, interpreter[]}
  tags           text[] not null default '{}',
  credentials    jsonb not null default '{}',   -- ENV_VAR -> credential name, resolved at claim
  paused         boolean not null default false,
  next_fire_at   timestamptz,                   -- null while paused
  last_fired_at  timestamptz,
  last_run_id    text,
  created_by     text references users(id) on delete set null,
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  unique (project_id, name)
);

-- The timer loop's question every pass, across all projects: which schedules are due.
create index schedules_due on schedules (next_fire_at) where not paused;
