-- Connected accounts (issue 12). An account holds its name in the project's one name space
-- (connection_names, holder 'account', migration 008), so a credential and an account can never
-- share a name. Its tokens are sealed as one JSON document with the org key (core/src/seal.ts, kind
-- "account", bound to org, project and name): a ciphertext copied to another account fails to open.
-- `version` is the compare-and-set every status or token write goes through; `refresh_after` is when
-- the renewal loop next looks at it (null: never renewed, the provider gave no lifetime).
create table accounts (
  project_id     text not null,
  name           text not null,
  holder         text not null default 'account' check (holder = 'account'),
  provider       text not null,
  far_id         text not null,
  far_label      text not null,
  granter_id     text references users(id) on delete set null,
  status         text not null check (status in ('active', 'refreshing', 'needs_reauth', 'in_doubt', 'disabled')),
  sealed         bytea not null,
  expires_at     timestamptz,
  refresh_after  timestamptz,
  attempts       integer not null default 0,
  -- Set when a refresh is about to be sent, cleared when its outcome is written: a loop that finds
  -- it set (the last sender died mid-request) does not know whether the provider rotated.
  sending_since  timestamptz,
  last_error     text,
  version        bigint not null default 1,
  connected_at   timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  primary key (project_id, name),
  foreign key (project_id, name, holder) references connection_names (project_id, name, holder) on delete cascade
);
create index accounts_due on accounts (refresh_after) where status in ('active', 'refreshing') and refresh_after is not null;

-- One refresh at a time per account across every replica: a renewal loop takes this lease (insert,
-- or take over an expired one), re-reads the account, and writes back only under the version it read.
create table account_refresh_leases (
  project_id  text not null,
  name        text not null,
  holder      text not null,
  expires_at  timestamptz not null,
  primary key (project_id, name),
  foreign key (project_id, name) references accounts (project_id, name) on delete cascade
);

-- OAuth `state` of a connect in flight: single-use (deleted when read), short-lived, bound to the
-- user and the session that asked (digests only; the state and the session id are never stored),
-- with the PKCE verifier sealed (kind "account", name `<name>#pkce`).
create table oauth_states (
  state_digest    text primary key,
  project_id      text not null references projects(id) on delete cascade,
  user_id         text not null references users(id) on delete cascade,
  session_digest  text not null,
  name            text not null,
  provider        text not null,
  sealed_verifier bytea not null,
  expires_at      timestamptz not null,
  created_at      timestamptz not null default now()
);
create index oauth_states_expiry on oauth_states (expires_at);
