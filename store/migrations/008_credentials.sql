-- Credentials (issue 10, item 1). Credentials and connected accounts share one name space per
-- project (spec, Credential rule 5): every name is first claimed in connection_names by its holder,
-- whose primary key lets one project hold a name once, whatever holds it. A holder's own table
-- refers to its row there with (project_id, name, holder), so a credential row can only exist under
-- a name claimed for a credential; the connected-accounts table will do the same with holder
-- 'account'. Deleting the name row deletes what holds it.
create table connection_names (
  project_id  text not null references projects(id) on delete cascade,
  name        text not null,
  holder      text not null check (holder in ('credential', 'account')),
  created_at  timestamptz not null default now(),
  primary key (project_id, name),
  unique (project_id, name, holder)
);

-- A credential: its kind in clear (list and the requirements report need no key), its fields sealed
-- as JSON with the org key (core/src/seal.ts, kind "credential", bound to org, project and name).
-- The sealed JSON repeats the kind, and a row whose two kinds differ does not resolve.
create table credentials (
  project_id  text not null,
  name        text not null,
  holder      text not null default 'credential' check (holder = 'credential'),
  kind        text not null check (kind in ('bearer', 'api_key', 'basic', 'url_token')),
  sealed      bytea not null,
  set_at      timestamptz not null default now(),
  primary key (project_id, name),
  foreign key (project_id, name, holder) references connection_names (project_id, name, holder) on delete cascade
);

-- What a run declares: ENV_VAR -> credential name (`flow submit --credential`). Names only; the
-- values are resolved at claim and never stored in the run (spec, Credential rule 1).
alter table runs add column credentials jsonb not null default '{}';
