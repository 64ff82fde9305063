-- What a run's rows cost in index upkeep (issue 15 item 7). A run is inserted queued, then
-- updated to running and to its end; no update of runs is HOT (status is in the predicates of
-- runs_live_created, runs_handler_in_flight and runs_cancel_on_live), so each of those three row
-- versions is inserted into every index whose predicate it meets. Two of them served (almost) no
-- query:
--
-- 1. runs_project_status (project_id, status): the one query on runs by project and status is
--    listRunViews (`flow runs ls --status`), whose status filter is `($2 is null or status = $2)`
--    under `order by created_at desc limit`: runs_project_created serves it, and runs of a live
--    status are also in runs_live_created. Its other "use" was a mistake of the planner: lookups
--    of one run by `project_id = $1 and id = $2`, planned while runs was empty, chose it and read
--    every run of the project (the store now looks a run up by id first: runs.ts RUN_BY_ID_SQL).
--
-- 2. The unique constraint on (project_id, idempotency_key) held every run, though only runs
--    submitted with an idempotency key have one. A unique index with `where idempotency_key is not
--    null` enforces the same rule (nulls never conflicted) and holds only those runs. The insert's
--    `on conflict do nothing` (run-lifecycle.ts CREATE_RUNS_SQL) has no conflict target, so every
--    unique index, partial ones included, is its arbiter; createRun's lookup of the first run
--    (`project_id = $1 and idempotency_key = $2`) implies the predicate, so the index serves it.
--
-- Per run that is 6 index tuples fewer (3 of each). The other indexes of runs and jobs each serve
-- a query the run's life needs (primary keys, runs_project_created, runs_live_created and
-- runs_finished_at for the Kubernetes mirror, runs_handler_in_flight, runs_cancel_on_live,
-- jobs_ready, jobs_leased, jobs_run, jobs_token). A lower fillfactor was measured and left:
-- without HOT it only keeps a new row version on its page, which already happens for most of
-- the updates (91% of runs', 94% of jobs' in a burst of 400 runs: pg_stat_user_tables n_tup_newpage_upd).
drop index runs_project_status;

create unique index runs_idempotency_key on runs (project_id, idempotency_key) where idempotency_key is not null;
alter table runs drop constraint runs_project_id_idempotency_key_key;
