/**
 * Credentials in Postgres (migration 008): the shared name space with connected accounts, the
 * sealed rows, and what a run declares. Values are sealed and opened here with the keyring
 * (kind "credential", bound to org, project and name); no function answers a value to a route
 * except `openRunCredentials`, which the claim hands to the job's agent.
 */
import type { Pool, PoolClient } from "pg";
import {
  FlowError,
  USABLE_ACCOUNT_STATUSES,
  connectorManifest,
  graphCredentialRequirements,
  requirementsReport,
  type GraphDocument,
  type RequirementsReport,
  credentialFromSealedText,
  type AccountStatus,
  credentialToSealedText,
  type CredentialKind,
  type CredentialMeta,
  type CredentialValue,
  type NameHolding,
  type ResolvedHolding,
} from "@flowsvc/core";
import { disableOrphanedAccounts, openAccountToken } from "./accounts.js";
import { finishActivity } from "./activities.js";
import type { Keyring } from "./keyring.js";
import { appendLogs } from "./logs.js";
import { withTransaction } from "./pool.js";
import { completeRun } from "./run-lifecycle.js";
import { settleNodeJob } from "./graph-runs.js";

type Db = Pool | PoolClient;

/** What `list` shows of a credential: never a value, nor any field (core's type, shared with the ResourceStore port). */
export type { CredentialMeta };

type MetaRow = { name: string; kind: CredentialKind; set_at: Date };
const meta = (r: MetaRow): CredentialMeta => ({ name: r.name, kind: r.kind, set_at: r.set_at.toISOString() });

export interface CredentialScope {
  orgId: string;
  projectId: string;
}

const sealContext = (s: CredentialScope, name: string) => ({ org: s.orgId, project: s.projectId, kind: "credential" as const, name });

/**
 * Claims `name` for `holder` in the project's one name space (credentials and connected accounts),
 * or refuses it with `conflict` when the other holder has it. The caller's transaction keeps the
 * claim and the holder's row together. Connected accounts call this with "account".
 */
export const claimConnectionName = async (
  tx: PoolClient,
  projectId: string,
  name: string,
  holder: "credential" | "account",
): Promise<void> => {
  await tx.query(`insert into connection_names (project_id, name, holder) values ($1, $2, $3) on conflict (project_id, name) do nothing`, [
    projectId,
    name,
    holder,
  ]);
  const { rows } = await tx.query<{ holder: string }>(
    `select holder from connection_names where project_id = $1 and name = $2 for update`,
    [projectId, name],
  );
  const held = rows[0]?.holder;
  if (held !== holder) {
    const other = held === "account" ? "a connected account" : "a credential";
    throw new FlowError(
      "conflict",
      `the name ${name} is already taken by ${other} in this project: credentials and connected accounts share one name space`,
      {
        hint:
          held === "account"
            ? "choose another name, or remove the account first (flow account rm)"
            : `choose another name, or remove the credential first (flow credential rm ${name})`,
        details: { field: "name", held_by: held },
      },
    );
  }
};

/** Creates or replaces a credential: sealed, bound to its org, project and name. */
export const setCredential = async (
  pool: Pool,
  keyring: Keyring,
  { scope, name, value }: { scope: CredentialScope; name: string; value: CredentialValue },
): Promise<CredentialMeta> => {
  const sealed = await keyring.seal(scope.orgId, sealContext(scope, name), credentialToSealedText(value));
  return withTransaction(pool, async (tx) => {
    await claimConnectionName(tx, scope.projectId, name, "credential");
    const { rows } = await tx.query<MetaRow>(
      `insert into credentials (project_id, name, kind, sealed, set_at) values ($1, $2, $3, $4, now())
       on conflict (project_id, name) do update set kind = excluded.kind, sealed = excluded.sealed, set_at = now()
       returning name, kind, set_at`,
      [scope.projectId, name, value.kind, Buffer.from(sealed)],
    );
    return meta(rows[0]!);
  });
};

export const listCredentials = async (db: Db, projectId: string): Promise<CredentialMeta[]> => {
  const { rows } = await db.query<MetaRow>(`select name, kind, set_at from credentials where project_id = $1 order by name`, [projectId]);
  return rows.map(meta);
};

/** Deletes a credential and frees its name; false when the project has no credential of that name. */
export const deleteCredential = async (db: Db, projectId: string, name: string): Promise<boolean> => {
  const { rowCount } = await db.query(`delete from connection_names where project_id = $1 and name = $2 and holder = 'credential'`, [
    projectId,
    name,
  ]);
  return (rowCount ?? 0) > 0;
};

/** Records the credentials a new run declares (`ENV_VAR -> name`), in the transaction that created it. */
export const setRunCredentials = async (tx: PoolClient, runId: string, declared: Readonly<Record<string, string>>): Promise<void> => {
  if (Object.keys(declared).length > 0) await tx.query(`update runs set credentials = $2 where id = $1`, [runId, JSON.stringify(declared)]);
};

/**
 * Records what each of many new runs declares (handler runs: their handler's `--credential` map),
 * one update by primary key per run: as one update joined to an unnest of the ids (or `id =
 * any($1)`), the generic plan made while runs is small (a new server's connections keep it) scanned
 * every run (generic-plans.test.ts). A batch holds the few handler runs of one emit that declare
 * credentials; runs that declare nothing are not touched.
 */
export const setRunsCredentials = async (
  tx: PoolClient,
  runs: ReadonlyArray<{ runId: string; declared: Readonly<Record<string, string>> }>,
): Promise<void> => {
  for (const r of runs) await setRunCredentials(tx, r.runId, r.declared);
};

/** A rerun declares what the run it reruns declared. */
export const copyRunCredentials = async (tx: PoolClient, fromRunId: string, toRunId: string): Promise<void> => {
  await tx.query(`update runs set credentials = (select credentials from runs where id = $1) where id = $2`, [fromRunId, toRunId]);
};

export interface RunCredentials {
  /** `ENV_VAR -> name`, as the run declares it. */
  declared: Record<string, string>;
  /** What the project holds under each declared name, opened. */
  holdings: Map<string, ResolvedHolding>;
}

/**
 * One sealed row, opened: its value, or undefined when it does not open (a wrong key, a row moved
 * or edited) or its sealed kind is not its row's. A database error still fails the caller.
 */
const openCredential = async (
  keyring: Keyring,
  scope: CredentialScope,
  row: { name: string; kind: CredentialKind; sealed: Buffer },
): Promise<CredentialValue | undefined> => {
  const text = await keyring.open(scope.orgId, sealContext(scope, row.name), row.sealed).catch((err: unknown) => {
    if (err instanceof FlowError) return undefined;
    throw err;
  });
  return text === undefined ? undefined : credentialFromSealedText(text, row.kind);
};

/** One credential a run declares, with what its project holds under that name (sealed). */
export type DeclaredRow = {
  variable: string;
  name: string;
  kind: CredentialKind | null;
  sealed: Buffer | null;
  account_status: AccountStatus | null;
  account_sealed: Buffer | null;
};

/** What the project holds under one declared name: its credential (opened) and/or its account (a usable one's token opened). */
const openHolding = async (keyring: Keyring, scope: CredentialScope, r: DeclaredRow): Promise<ResolvedHolding> => {
  const holding: {
    credential?: { kind: CredentialKind };
    account?: { status: AccountStatus };
    value?: CredentialValue;
    accountToken?: string;
  } = {};
  if (r.kind !== null && r.sealed !== null) {
    holding.credential = { kind: r.kind };
    // A value that does not open is held without one: the resolver fails the job on it.
    const value = await openCredential(keyring, scope, { name: r.name, kind: r.kind, sealed: r.sealed });
    if (value) holding.value = value;
  }
  if (r.account_status !== null && r.account_sealed !== null) {
    holding.account = { status: r.account_status };
    // Only a usable account's token is opened; the resolver fails the job on any other status.
    if (USABLE_ACCOUNT_STATUSES.includes(r.account_status) && !holding.credential) {
      const token = await openAccountToken(keyring, scope, { name: r.name, sealed: r.account_sealed });
      if (token !== undefined) holding.accountToken = token;
    }
  }
  return holding;
};

/**
 * The credential and the account are each looked up by primary key (a lateral subquery the fence,
 * `offset 0`, keeps from being flattened into a join): as plain joins, the generic plan made while
 * the tables are small (a new server's connections keep it) hashed a scan of every project's
 * credentials and accounts on each claim (generic-plans.test.ts).
 */
const DECLARED_QUERY = `select d.key as variable, d.value as name, c.kind, c.sealed, a.status as account_status, a.sealed as account_sealed
       from runs r cross join lateral jsonb_each_text(r.credentials) d
       left join lateral (select c.kind, c.sealed from credentials c where c.project_id = r.project_id and c.name = d.value offset 0) c on true
       left join lateral (select a.status, a.sealed from accounts a where a.project_id = r.project_id and a.name = d.value offset 0) a on true
      where r.id = $1`;

/**
 * What a run declares and what its project holds under those names, opened for the claim (one
 * query; a run that declares nothing costs no decryption). A value that does not open (a wrong key,
 * a row moved or edited) is left without a value: the resolver fails the job on it.
 */
export const openRunCredentials = async (db: Db, keyring: Keyring, runId: string, scope: CredentialScope): Promise<RunCredentials> =>
  openDeclaredCredentials(db, keyring, { runId, scope, rows: (await db.query<DeclaredRow>(DECLARED_QUERY, [runId])).rows });

/**
 * openRunCredentials on rows already read (the claim reads them with its job: store's
 * claimReadsByToken). Rows naming an account are read again once orphaned accounts are disabled.
 */
export const openDeclaredCredentials = async (
  db: Db,
  keyring: Keyring,
  read: { readonly runId: string; readonly scope: CredentialScope; readonly rows: readonly DeclaredRow[] },
): Promise<RunCredentials> => {
  const { runId, scope } = read;
  let rows = read.rows;
  // A granter who left the project disables the accounts they granted (checked where accounts are used).
  if (rows.some((r) => r.account_status !== null) && (await disableOrphanedAccounts(db, scope.projectId)) > 0)
    ({ rows } = await db.query<DeclaredRow>(DECLARED_QUERY, [runId]));
  const declared: Record<string, string> = {};
  const holdings = new Map<string, ResolvedHolding>();
  for (const r of rows) {
    declared[r.variable] = r.name;
    if ((r.sealed === null && r.account_sealed === null) || holdings.has(r.name)) continue;
    holdings.set(r.name, await openHolding(keyring, scope, r));
  }
  return { declared, holdings };
};

/**
 * One credential of a project, opened (the controller compares what a Secret says with what is
 * sealed before sealing again); undefined when there is none or it does not open.
 */
export const openCredentialValue = async (
  db: Db,
  keyring: Keyring,
  scope: CredentialScope,
  name: string,
): Promise<CredentialValue | undefined> => {
  const { rows } = await db.query<{ name: string; kind: CredentialKind; sealed: Buffer }>(
    `select name, kind, sealed from credentials where project_id = $1 and name = $2`,
    [scope.projectId, name],
  );
  return rows[0] === undefined ? undefined : openCredential(keyring, scope, rows[0]);
};

/**
 * What the project holds under each of `names`, opened (credentials and connected accounts), for an
 * http or connector node at dispatch: core's holdingValue then gives the value renderHttpAuth sends,
 * or why the node fails with nothing sent. A granter who left disables their accounts first.
 */
export const openProjectHoldings = async (
  db: Db,
  keyring: Keyring,
  scope: CredentialScope,
  names: readonly string[],
): Promise<Map<string, ResolvedHolding>> => {
  const query = `select n.name as variable, n.name, c.kind, c.sealed, a.status as account_status, a.sealed as account_sealed
       from unnest($2::text[]) as n(name)
       left join credentials c on c.project_id = $1 and c.name = n.name
       left join accounts a on a.project_id = $1 and a.name = n.name`;
  let { rows } = await db.query<DeclaredRow>(query, [scope.projectId, [...new Set(names)]]);
  if (rows.some((r) => r.account_status !== null) && (await disableOrphanedAccounts(db, scope.projectId)) > 0)
    ({ rows } = await db.query<DeclaredRow>(query, [scope.projectId, [...new Set(names)]]));
  const holdings = new Map<string, ResolvedHolding>();
  for (const r of rows) if (r.sealed !== null || r.account_sealed !== null) holdings.set(r.name, await openHolding(keyring, scope, r));
  return holdings;
};

/**
 * Every credential of a project, opened, for the run maskers, and each connected account's current
 * access token as a bearer value (a token a script wrote to an output or annotation is masked too);
 * a value that does not open is left out.
 */
export const openProjectCredentials = async (db: Db, keyring: Keyring, scope: CredentialScope): Promise<CredentialValue[]> => {
  const { rows } = await db.query<{ name: string; kind: CredentialKind; sealed: Buffer }>(
    `select name, kind, sealed from credentials where project_id = $1 order by name`,
    [scope.projectId],
  );
  const { rows: accounts } = await db.query<{ name: string; sealed: Buffer }>(
    `select name, sealed from accounts where project_id = $1 order by name`,
    [scope.projectId],
  );
  const opened = await Promise.all([
    ...rows.map((r) => openCredential(keyring, scope, r)),
    ...accounts.map(async (a): Promise<CredentialValue | undefined> => {
      const token = await openAccountToken(keyring, scope, a);
      return token === undefined ? undefined : { kind: "bearer", token };
    }),
  ]);
  return opened.filter((v): v is CredentialValue => v !== undefined);
};

/**
 * A stamp of a project's credentials and connected accounts: (name, set_at) of each credential and
 * (name, version) of each account, digested. Setting, replacing or deleting one, or an account's
 * renewal, changes it, so the run maskers' cache knows when to open them again.
 */
/**
 * The stamp of a project's credentials and accounts as a SQL expression of `projectIdSql` (a
 * column or a parameter): a digest of every (name, set_at or version), nothing opened. Beside
 * the secrets' stamp in one statement (projectSecretScope, runSecretScope).
 */
export const credentialStampSql = (projectIdSql: string): string =>
  `(select coalesce(md5(string_agg(s, ',' order by s)), '') from (
       select 'c:' || name || '@' || set_at::text as s from credentials where project_id = ${projectIdSql}
       union all select 'a:' || name || '@' || version::text from accounts where project_id = ${projectIdSql}) x)`;

export const credentialStamp = async (db: Db, projectId: string): Promise<string> => {
  const { rows } = await db.query<{ stamp: string }>(`select ${credentialStampSql("$1")} as stamp`, [projectId]);
  return rows[0]?.stamp ?? "";
};

/**
 * A job whose credentials do not resolve fails at claim, before anything runs (spec, Errors: "the
 * job fails; variable never left unset"): the job ends, a script job fails its run (no retry: the
 * same claim would fail again), an activity fails for its parent to see, and the run's log says
 * why. False when the job was no longer live (another claim or finish came first).
 */
export const failJobAtClaim = async (
  tx: PoolClient,
  f: { job: { id: string; run_id: string; kind: string; activity_id: string | null }; error: string; publicUrl: string | undefined },
): Promise<boolean> => {
  const { rowCount } = await tx.query(
    `update jobs set status = 'done', token_digest = null, lease_expires_at = null, updated_at = now()
      where id = $1 and status in ('dispatched', 'running')`,
    [f.job.id],
  );
  if ((rowCount ?? 0) === 0) return false;
  await appendLogs(tx, f.job.run_id, f.job.id, [{ stream: "system", data: `flowsvc: ${f.error}\n` }]);
  if (f.job.kind === "node") await settleNodeJob(tx, f.job.id, { ok: false, error: f.error });
  else if (f.job.kind === "activity" && f.job.activity_id)
    await finishActivity(tx, f.job.activity_id, { exit_code: 1, stdout_b64: "", error: f.error });
  else await completeRun(tx, f.job.run_id, { status: "failed", error: f.error }, f.publicUrl);
  return true;
};

/**
 * One named credential of a project, with its value when it opens (http and connector nodes at
 * dispatch): what the resolver's checkConnection needs, and nothing when the name holds nothing.
 */
export const openNamedCredential = async (
  db: Db,
  keyring: Keyring,
  scope: CredentialScope,
  name: string,
): Promise<ResolvedHolding | undefined> => {
  const { rows } = await db.query<{ name: string; kind: CredentialKind; sealed: Buffer }>(
    `select name, kind, sealed from credentials where project_id = $1 and name = $2`,
    [scope.projectId, name],
  );
  const row = rows[0];
  if (!row) return undefined;
  const value = await openCredential(keyring, scope, row);
  return { credential: { kind: row.kind }, ...(value ? { value } : {}) };
};

/**
 * What a project holds under each of `names`, as the credential resolver reads it (core's
 * NameHolding): a credential's kind and/or a connected account's status (migration 013), read from
 * the `credentials` and `accounts` tables themselves, so an `active`/`refreshing` account is `ok`
 * for a bearer use, any other status `needs_reconnect`, and a name found in both `conflict`. An
 * account whose granter is no member of the project any more is reported `disabled` (it is, at its
 * next use: disableOrphanedAccounts), without writing anything here. No value is opened. The one
 * reader of holdings: the graph requirements report and the submit-time check both use it.
 */
export const readNameHoldings = async (db: Db, projectId: string, names: readonly string[]): Promise<Map<string, NameHolding>> => {
  const { rows } = await db.query<{ name: string; kind: CredentialKind | null; account_status: AccountStatus | null }>(
    `select n.name, c.kind,
            case when a.name is null then null
                 when not exists (select 1 from memberships m where m.project_id = a.project_id and m.user_id = a.granter_id offset 0) then 'disabled'
                 else a.status end as account_status
       from unnest($2::text[]) as n(name)
       left join lateral (select c.kind from credentials c where c.project_id = $1 and c.name = n.name offset 0) c on true
       left join lateral (select a.name, a.status, a.project_id, a.granter_id from accounts a where a.project_id = $1 and a.name = n.name offset 0) a on true`,
    // Each name's credential, account and membership by primary key (fenced by `offset 0`): as joins, the
    // generic plan made while the tables are small read every credential of the project, and hashed a
    // scan of every project's members (generic-plans.test.ts).
    [projectId, [...new Set(names)]],
  );
  const out = new Map<string, NameHolding>();
  for (const r of rows) {
    if (r.kind === null && r.account_status === null) continue;
    out.set(r.name, {
      ...(r.kind !== null ? { credential: { kind: r.kind } } : {}),
      ...(r.account_status !== null ? { account: { status: r.account_status } } : {}),
    });
  }
  return out;
};

/**
 * A graph's requirements report against what its project holds: the one reader behind the report
 * route, the submit-time check (core's submitCheck of this report) and `flow call`'s child check.
 * `manifestOf` is core's connector manifests unless a test gives its own.
 */
export const graphRequirements = async (
  db: Db,
  projectId: string,
  graph: GraphDocument,
  manifestOf: Parameters<typeof graphCredentialRequirements>[1] = connectorManifest,
): Promise<RequirementsReport> => {
  const requirements = graphCredentialRequirements(graph, manifestOf);
  const holdings = await readNameHoldings(
    db,
    projectId,
    requirements.flatMap((r) => (r.name === null ? [] : [r.name])),
  );
  return requirementsReport(requirements, (name) => holdings.get(name));
};
