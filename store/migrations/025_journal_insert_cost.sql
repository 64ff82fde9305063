-- What a journal row costs at insert beyond its own tuple (issue 15 item 3: every `flow step` is
-- one journal insert, committed before the step answers).
--
-- journal_run_id_fkey checked every row with its own `select ... for key share` of the run: a
-- tuple lock on the runs row (its xmax rewritten and a heap-lock WAL record) per step, on the
-- step's critical path. Measured on the step's one-statement record (store's
-- recordJournalForToken, one connection, 8 x 300 records): 371-389 us per record with it, 293-317 us
-- without. Every way a row gets into the journal already names a run that exists in the inserting
-- statement or its transaction: a job's record (recordJournalForToken joins the job, whose own
-- foreign key holds its run; recordJournal and the durable calls run for the job's run), and
-- `flow rerun` copies rows in the transaction that creates the new run. No code deletes a run; the
-- cascade of a run's deletion (its project's or org's, by hand) stays, as a trigger: it deletes the
-- run's committed journal rows.
alter table journal drop constraint journal_run_id_fkey;

create function flowsvc_delete_run_journal() returns trigger language plpgsql as $$
begin
  delete from journal where run_id = old.id;
  return old;
end $$;

create trigger runs_delete_journal after delete on runs
  for each row execute function flowsvc_delete_run_journal();
