-- Step and activity output sealed at rest (issue 14). They must replay byte for byte, so they are
-- kept as recorded, but sealed with the org key (kind "journal"): a step may print a secret. The
-- sealed form is a string `flowsvc-sealed:1:<name>:<base64>` stored where the plain value was, so
-- `flow rerun`'s copy of the journal carries it unchanged (core/src/sealed-journal.ts). Rows written
-- before this migration hold plain values and still read; nothing here rewrites them (sealing
-- needs the master key, which SQL does not have).
comment on column journal.result is
  'the call''s result; a step''s is sealed (flowsvc-sealed:1:<run>#<position>:<base64>), an activity''s stdout_b64 too';
comment on column activities.stdout_b64 is
  'the activity''s stdout, sealed (flowsvc-sealed:1:<activity id>:<base64>); plain base64 in rows written before 006';
