-- A granter who leaves the project disables the accounts they granted there, at the moment they
-- leave (spec, "Connected account status": "granting member leaves the project or org ->
-- disabled"). A trigger, so whatever removes the membership does it in its own transaction: the
-- members route (store/src/members.ts), a user's deletion (its memberships cascade), an operator's
-- own SQL. A user's deletion also sets accounts.granter_id to null (migration 013); the two
-- cascades run in an order Postgres does not promise, so an account whose granter is already null
-- is caught too. The claim's check (disableOrphanedAccounts) stays as a second line. The version
-- bump makes a renewal in flight write nothing over it. A project being deleted takes its accounts
-- with it: nothing to disable then.
create function disable_accounts_of_leaving_member() returns trigger language plpgsql as $$
begin
  update accounts set status = 'disabled', refresh_after = null, version = version + 1, updated_at = now()
   where project_id = old.project_id and (granter_id = old.user_id or granter_id is null) and status <> 'disabled'
     and exists (select 1 from projects p where p.id = old.project_id);
  return null;
end
$$;

create trigger memberships_leaving_disables_accounts
  after delete on memberships
  for each row execute function disable_accounts_of_leaving_member();
