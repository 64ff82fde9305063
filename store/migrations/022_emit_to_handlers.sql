-- A user's emit that starts script handler runs, in one round trip (issue 15 item 3; store/src/emit-direct.ts
-- `emitToHandlers`): the events, their handler runs with their first jobs, and for each job that this
-- process's dispatcher had a free agent for, the dispatch itself, by one call of this function in
-- autocommit, its commit included. The transactional way (emitEvents) took five round trips and a
-- dispatcher's claim statement after it; under load each round trip waited for the CPU, and an emit
-- spent most of its latency there.
--
-- The caller planned the runs from the project's handlers as cached at `handlers_rev` (the `when`
-- predicates evaluated in the server, as emitEvents does). Anything the plan did not see declines
-- (SQLSTATE FL001, nothing written: the implicit transaction rolls back) and the batch goes the
-- transactional way, which does the rest: the handlers moved on from that revision, a `wait-event`
-- of the type is parked, a live run that the event cancels (these three are the checks of hook
-- ingest's flowsvc_record_events_alone, migration 019, which records the events here), or the
-- project's handler runs in flight would pass the limit (the transactional way then refuses the
-- emit with its message).
--
-- Locks, each in a statement of its own so that the statements after them take their snapshots
-- later: the bus locks shared (taken by flowsvc_record_events_alone before its insert, as emitEvents
-- takes them in BEGIN's round trip: every parked waiter is seen), then each project's handler-runs
-- lock (createRuns's key, in the same order: the count sees every emit of the project that
-- committed before).
--
-- p_runs: one object per run, as createRuns's columns (newRunDefaults) plus `credentials` (the
-- handler's declared map), `job_id`, and for a job dispatched here `digest` (hex of its token's
-- digest) and `lease_ms`; such a job is inserted `dispatched` at attempt 1, as the dispatcher's
-- claim would leave it. The NOTIFY on flowsvc_jobs (payload: the least run id, as createRuns sends
-- it) goes only when some job is left queued for the dispatcher.
create function flowsvc_emit_to_handlers(
  p_lock_keys bigint[],
  p_ids text[],
  p_project_ids text[],
  p_types text[],
  p_keys text[],
  p_payloads text[],
  p_trusted boolean[],
  p_handlers_revs bigint[],
  p_runs jsonb,
  p_limit integer
) returns void language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  dims integer[] := array[cardinality(p_ids)];
begin
  -- The events, with every check that sends a batch the transactional way (the handlers moved, a
  -- parked waiter, a live cancel_on run), are hook ingest's one-round-trip record (migration 019),
  -- given no hook fields; it takes the bus locks first and declines with FL001 as this does.
  perform flowsvc_record_events_alone(p_lock_keys, p_ids, p_project_ids, p_types, p_keys, p_payloads,
                                      array_fill(null::text, dims), array_fill(null::text, dims),
                                      array_fill(null::text, dims), p_trusted, array_fill(null::uuid, dims),
                                      p_handlers_revs);
  perform pg_advisory_xact_lock(hashtextextended('handlers-in-flight' || chr(31) || p, 16))
     from (select distinct r->>'project_id' as p from jsonb_array_elements(p_runs) as r order by 1) o;

  -- createRuns's count of handler runs in flight; the statuses are runs_handler_in_flight's predicate
  -- (migration 003), so that index serves it.
  if exists (
    select 1 from (select r->>'project_id' as project_id, count(*) as wanted from jsonb_array_elements(p_runs) as r group by 1) w
     where w.wanted + (select count(*) from runs r
                        where r.project_id = w.project_id and r.handler_name is not null
                          and r.status in ('queued', 'running', 'parked')) > p_limit
  ) then
    raise exception 'the emit needs the transactional way' using errcode = 'FL001';
  end if;

  insert into runs (id, project_id, workflow, status, source, filename, interpreter, env, tags, trigger, created_by,
                    trusted, handler_name, event_id, generation, credentials)
  select r.id, r.project_id, r.workflow, 'queued', r.source, r.filename, r.interpreter, r.env, r.tags, r.trigger, r.created_by,
         r.trusted, r.handler_name, r.event_id, r.generation, r.credentials
    from jsonb_to_recordset(p_runs) as r(id text, project_id text, workflow text, source text, filename text, interpreter text[], env jsonb,
                                         tags text[], trigger jsonb, created_by text, trusted boolean, handler_name text, event_id text,
                                         generation integer, credentials jsonb);

  insert into jobs (id, run_id, status, kind, capabilities, attempt, token_digest, lease_expires_at)
  select j.job_id, j.id, case when j.digest is null then 'queued' else 'dispatched' end, 'run', j.capabilities,
         case when j.digest is null then 0 else 1 end, decode(j.digest, 'hex'),
         case when j.digest is null then null else now() + (j.lease_ms * interval '1 millisecond') end
    from jsonb_to_recordset(p_runs) as j(id text, job_id text, capabilities text[], digest text, lease_ms integer);

  if exists (select 1 from jsonb_array_elements(p_runs) as r where r->>'digest' is null) then
    perform pg_notify('flowsvc_jobs', (select min(r->>'id' collate "C") from jsonb_array_elements(p_runs) as r));
  end if;
end $$;
