-- What an events row costs at insert beyond its own heap tuple (issue 15 item 2), cut to what
-- some query or rule needs. The indexes kept, and the queries each serves:
--   events_pkey (id)                           getEvent, getEventForEnvelope, deliverToWaiters' seq of the event
--   events_project_seq (project_id, seq desc)  listEvents without a type (`flow events ls`)
--   events_project_type (project_id, type, seq desc)
--                                              listEvents with a type, listSeenEventTypes' loose index scan,
--                                              and `flow wait-event`'s bus position (calls.ts)
--   events_delivery (project_id, hook_name, delivery_id) partial unique
--                                              the redelivery check (on conflict) and its lookup
--
-- 1. events_seq_key, the unique constraint of `seq bigserial unique`, served only
--    `select max(seq) from events` (a waiter's position over the whole bus). That position is now
--    the highest seq of the waiter's own project and type (events_project_type), which orders the
--    same events: a waiter only ever takes events of its project and type, and the type's bus lock
--    keeps every emit of it out of the gap. seq stays a bigserial: its values are unique by the
--    sequence, not by the index.
--
-- 2. events_project_id_fkey checked every row with its own `select ... for key share` of the
--    project (measured on a 9-row batch: ~100 us of the function's ~500 us of backend CPU). Both
--    ways onto the bus already check the project in the inserting statement (emit.ts recordEvents
--    answers not_found, rolling back, for a project it does not find; flowsvc_record_events_alone
--    joins projects), and no code deletes a project. The cascade of a project's deletion (an org's,
--    by hand) stays, as a trigger: it deletes the project's committed events.
alter table events drop constraint events_seq_key;
alter table events drop constraint events_project_id_fkey;

create function flowsvc_delete_project_events() returns trigger language plpgsql as $$
begin
  delete from events where project_id = old.id;
  return old;
end $$;

create trigger projects_delete_events after delete on projects
  for each row execute function flowsvc_delete_project_events();
