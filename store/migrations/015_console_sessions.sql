-- Web console sessions (issue 12, item 5). A person logs in with an API token; the console hands
-- back a random session id in an httpOnly cookie and keeps only its SHA-256 digest here, bound to
-- the token that opened it: deleting the token (or its user) ends every session it opened, and a
-- session can never do more than its token. `csrf_digest` is the digest of the per-session CSRF
-- token every console form posts back. A session ends at `expires_at` or at logout (row deleted).
create table console_sessions (
  digest       bytea primary key,
  token_id     text not null references api_tokens(id) on delete cascade,
  csrf         text not null,
  created_at   timestamptz not null default now(),
  expires_at   timestamptz not null
);

create index console_sessions_expiry on console_sessions (expires_at);
