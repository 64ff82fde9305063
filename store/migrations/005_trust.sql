-- Trust has no default (issue 14): every insert of a run or an event says whether it may see
-- secrets, as core/src/trust.ts derives it from what caused it. A forgotten column fails the
-- insert (not null) instead of making the row trusted.
alter table runs alter column trusted drop default;
alter table events alter column trusted drop default;
