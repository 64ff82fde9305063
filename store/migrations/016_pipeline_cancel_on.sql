-- A pipeline run's `cancel_on: [types]` (issue 11): an event of one of these types whose subject
-- matches the run's (the run has none, the event has none, or they are equal) cancels the run, in
-- the emit's transaction (store/src/emit.ts `cancelOnEvents`). The partial index keeps the check
-- an empty index probe for projects without such runs.
alter table runs add column cancel_on text[];
create index runs_cancel_on_live on runs (project_id)
  where cancel_on is not null and status not in ('succeeded', 'failed', 'cancelled');
