-- flowsvc_record_events_alone (migration 019) with its three probes written so that each is
-- always a per-row lookup on its index, whatever the tables' statistics were when a connection
-- planned it (issue 15 item 2). The function runs with a generic plan (force_generic_plan), made
-- once per connection and kept until an ANALYZE of one of its tables invalidates it. As 019 wrote
-- them, the planner turned the `not exists` probes into anti joins, and on the small tables of a
-- new or quiet database it chose a hash anti join over a sequential scan of every run with a
-- cancel_on (built at each call), a nested loop over every run of the project for the waiter
-- probe (runs_project_status, then journal_pkey of each run), and a hashed sequential scan of
-- event_hooks for the hook probe. Measured on the embedded Postgres (one row per call, backend
-- CPU per call, plans made while the tables were small, then 20,000 finished runs of the project
-- with a journal row each added, before autovacuum analyzed them): 19.7 and 45.7 ms in two runs
-- against 0.56 and 0.58 ms for this version; after an ANALYZE the two cost the same within this
-- host's noise (0.49 against 0.49 ms), and on the small tables too (0.49 against 0.48 ms).
--
-- `offset 0` keeps each subquery from being pulled up into a join (Postgres plans a sublink with
-- OFFSET as a correlated SubPlan), so each is a lookup with the row's values as parameters:
-- runs_cancel_on_live (project_id, partial on cancel_on and the live statuses), journal_pending_waits
-- (kind, name, partial on pending) then each pending waiter's run by its key (runs_pkey), and
-- event_hooks by its key (project_id, name). Checked with EXPLAIN on small tables and with 20,000 runs. What the function checks, declines and writes is unchanged.
create or replace function flowsvc_record_events_alone(
  p_lock_keys bigint[],
  p_ids text[],
  p_project_ids text[],
  p_types text[],
  p_keys text[],
  p_payloads text[],
  p_fields text[],
  p_hook_names text[],
  p_delivery_ids text[],
  p_trusted boolean[],
  p_hook_revs uuid[],
  p_handlers_revs bigint[]
) returns void language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  n bigint;
begin
  perform pg_advisory_xact_lock_shared(k) from unnest(p_lock_keys) as k;
  insert into events (id, project_id, type, key, payload, source_run_id, generation, fields, hook_name, delivery_id, trusted)
  select i.id, i.project_id, i.type, i.key, i.payload::jsonb, null, 0, i.fields::jsonb, i.hook_name, i.delivery_id, i.trusted
    from unnest(p_ids, p_project_ids, p_types, p_keys, p_payloads, p_fields, p_hook_names, p_delivery_ids, p_trusted, p_hook_revs, p_handlers_revs)
           with ordinality as i(id, project_id, type, key, payload, fields, hook_name, delivery_id, trusted, hook_rev, handlers_rev, ord)
    join projects p on p.id = i.project_id and p.handlers_rev = i.handlers_rev
   where (i.hook_rev is null or exists (
            select 1 from event_hooks h where h.project_id = i.project_id and h.name = i.hook_name and h.rev = i.hook_rev offset 0))
     and not exists (
            select 1 from journal j
             where j.kind = 'wait-event' and j.name = i.type and j.status = 'pending'
               and (select r.project_id from runs r where r.id = j.run_id) = i.project_id
            offset 0)
     and not exists (
            select 1 from runs r
             where r.project_id = i.project_id and r.cancel_on is not null and r.status not in ('succeeded', 'failed', 'cancelled')
               and i.type = any(r.cancel_on) and (i.key is null or r.trigger->>'key' is null or r.trigger->>'key' = i.key)
            offset 0)
   order by i.ord
  on conflict (project_id, hook_name, delivery_id) where delivery_id is not null do nothing;
  get diagnostics n = row_count;
  if n <> cardinality(p_ids) then
    raise exception 'the batch needs more than its event rows' using errcode = 'FL001';
  end if;
end $$;
