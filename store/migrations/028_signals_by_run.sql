-- Signals by run (session 9, generic plans): the only index on signals was signals_unclaimed
-- (run_id, name, id) where claimed_position is null, which serves the claim of the next unclaimed
-- signal. Three reads take a run's signals whatever their claim: who answered an approval gate
-- (approval-gates.ts gateAnsweredBy), a retry that hands a run's claimed signals back
-- (signals.ts releaseSignalClaims) and the cascade when a run is deleted with its project. Each was
-- a scan of every signal of every run. signals_run serves them; signals_unclaimed stays for the
-- claim (a run that took many signals of one name would read them all again on each claim).
create index signals_run on signals (run_id, name, id);
