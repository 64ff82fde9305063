-- Hook ingest's common case in one round trip (issue 15 item 2; store/src/emit.ts `recordAlone`):
-- a batch of deliveries that start no handler run, reach no parked `wait-event` and cancel no run
-- is only its event rows, so it is recorded by one call of this function in autocommit, its commit
-- included. Anything else declines (SQLSTATE FL001, nothing written: the implicit transaction
-- rolls back) and the batch goes the transactional way (emitEvents), which does the rest.
--
-- The bus locks come first, in a statement of their own: the insert below takes its snapshot after
-- them, so it sees every `flow wait-event` that parked before (the ordering emitEvents keeps by
-- taking them in BEGIN's round trip). The insert then declines, by inserting fewer rows than it was
-- given, when a hook is no longer the one verified against (its rev moved), the project's handlers
-- moved on from the revision at which the caller found none matching the type, a waiter of the type
-- is parked, a live run lists the type in its cancel_on (the terminal statuses are those of
-- runs_cancel_on_live's predicate, migration 016, so that index serves the probe), or a delivery id
-- was seen before.
create function flowsvc_record_events_alone(
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
            select 1 from event_hooks h where h.project_id = i.project_id and h.name = i.hook_name and h.rev = i.hook_rev))
     and not exists (
            select 1 from journal j join runs r on r.id = j.run_id
             where j.kind = 'wait-event' and j.name = i.type and j.status = 'pending' and r.project_id = i.project_id)
     and not exists (
            select 1 from runs r
             where r.project_id = i.project_id and r.cancel_on is not null and r.status not in ('succeeded', 'failed', 'cancelled')
               and i.type = any(r.cancel_on) and (i.key is null or r.trigger->>'key' is null or r.trigger->>'key' = i.key))
   order by i.ord
  on conflict (project_id, hook_name, delivery_id) where delivery_id is not null do nothing;
  get diagnostics n = row_count;
  if n <> cardinality(p_ids) then
    raise exception 'the batch needs more than its event rows' using errcode = 'FL001';
  end if;
end $$;
