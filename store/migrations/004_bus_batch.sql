-- Batched emits (issue 4, hook ingest throughput): an emit reads a project's handlers only when
-- they changed since it last looked. Every write to handlers, by whatever writer (the API, the
-- controller's reconciler, a test, psql), moves the project's revision on.
alter table projects add column handlers_rev bigint not null default 0;

create function flowsvc_bump_handlers_rev() returns trigger language plpgsql as $$
begin
  update projects set handlers_rev = handlers_rev + 1
   where id = (case when tg_op = 'DELETE' then old.project_id else new.project_id end);
  return null;
end $$;

create trigger handlers_rev after insert or update or delete on handlers
  for each row execute function flowsvc_bump_handlers_rev();

-- Hook ingest keeps the hooks it verifies with in memory. A delivery is recorded only if the hook
-- is still the one it was verified against: every insert and update gives the row a new rev (a
-- hook removed and set again gets a new one too), and the event's insert checks it.
alter table event_hooks add column rev uuid not null default gen_random_uuid();

create function flowsvc_new_hook_rev() returns trigger language plpgsql as $$
begin
  new.rev := gen_random_uuid();
  return new;
end $$;

create trigger event_hooks_rev before update on event_hooks
  for each row execute function flowsvc_new_hook_rev();
