/**
 * Connected accounts in Postgres (migration 013): the accounts in the shared name space, their
 * sealed tokens, the OAuth `state` rows of a connect in flight, and the refresh lease. Tokens are
 * sealed and opened here with the keyring (kind "account", bound to org, project and name); no
 * function answers a token to a route: the list shows names, providers, far-side labels, statuses.
 */
import { createHash, randomBytes } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import { FlowError, type AccountStatus, type AccountTokens, type RenewalDecision } from "@flowsvc/core";
import { claimConnectionName, type CredentialScope } from "./credentials.js";
import type { Keyring } from "./keyring.js";
import { withTransaction } from "./pool.js";

type Db = Pool | PoolClient;

const digest = (text: string): string => createHash("sha256").update(text).digest("hex");
const tokenContext = (s: CredentialScope, name: string) => ({ org: s.orgId, project: s.projectId, kind: "account" as const, name });
const verifierContext = (s: CredentialScope, name: string) => ({ ...tokenContext(s, name), name: `${name}#pkce` });

/** What `flow account list` and `GET .../accounts` show: never a token. */
export interface AccountMeta {
  name: string;
  provider: string;
  far_id: string;
  far_label: string;
  status: AccountStatus;
  granter: string | null;
  connected_at: string;
  expires_at: string | null;
}

type MetaRow = Omit<AccountMeta, "connected_at" | "expires_at"> & { connected_at: Date; expires_at: Date | null };
const meta = (r: MetaRow): AccountMeta => ({
  ...r,
  connected_at: r.connected_at.toISOString(),
  expires_at: r.expires_at ? r.expires_at.toISOString() : null,
});

/** What holds a name in the project's one name space (connection_names), if anything. */
export const connectionHolder = async (db: Db, projectId: string, name: string): Promise<"credential" | "account" | undefined> => {
  const { rows } = await db.query<{ holder: "credential" | "account" }>(
    `select holder from connection_names where project_id = $1 and name = $2`,
    [projectId, name],
  );
  return rows[0]?.holder;
};

/** The user id of an account's granter: null when that user is gone, undefined when there is no such account. */
export const accountGranter = async (db: Db, projectId: string, name: string): Promise<string | null | undefined> => {
  const { rows } = await db.query<{ granter_id: string | null }>(`select granter_id from accounts where project_id = $1 and name = $2`, [
    projectId,
    name,
  ]);
  return rows[0] === undefined ? undefined : rows[0].granter_id;
};

export const listAccounts = async (db: Db, projectId: string): Promise<AccountMeta[]> => {
  const { rows } = await db.query<MetaRow>(
    `select a.name, a.provider, a.far_id, a.far_label, a.status, u.name as granter, a.connected_at, a.expires_at
       from accounts a left join users u on u.id = a.granter_id where a.project_id = $1 order by a.name`,
    [projectId],
  );
  return rows.map(meta);
};

// ---- OAuth state ------------------------------------------------------------------------------

/** How long a connect may take from `connect` to the callback. */
export const OAUTH_STATE_TTL_SECS = 600;

export interface OAuthStateInput {
  scope: CredentialScope;
  userId: string;
  /** Whatever authenticates the browser session that asked (stored as a digest). */
  sessionId: string;
  name: string;
  provider: string;
  codeVerifier: string;
}

/** Stores a connect in flight and answers its `state` (random, 256 bits); only its digest is kept. */
export const createOAuthState = async (pool: Pool, keyring: Keyring, input: OAuthStateInput): Promise<string> => {
  const state = randomBytes(32).toString("base64url");
  const sealed = await keyring.seal(input.scope.orgId, verifierContext(input.scope, input.name), input.codeVerifier);
  await pool.query(`delete from oauth_states where expires_at < now()`);
  await pool.query(
    `insert into oauth_states (state_digest, project_id, user_id, session_digest, name, provider, sealed_verifier, expires_at)
     values ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8))`,
    [
      digest(state),
      input.scope.projectId,
      input.userId,
      digest(input.sessionId),
      input.name,
      input.provider,
      Buffer.from(sealed),
      OAUTH_STATE_TTL_SECS,
    ],
  );
  return state;
};

export interface TakenOAuthState {
  scope: CredentialScope;
  userId: string;
  name: string;
  provider: string;
  codeVerifier: string;
}

const STATE_REFUSED =
  "this sign-in link is not valid (unknown, already used, expired, or from another browser session): start connecting again";

/**
 * Takes a `state` once: the row is deleted whatever follows, so a replay finds nothing. Refused
 * (`invalid_argument`) when unknown, used, expired, or bound to another session.
 */
export const takeOAuthState = async (pool: Pool, keyring: Keyring, f: { state: string; sessionId: string }): Promise<TakenOAuthState> => {
  const { rows } = await pool.query<{
    org_id: string;
    project_id: string;
    user_id: string;
    session_digest: string;
    name: string;
    provider: string;
    sealed_verifier: Buffer;
    live: boolean;
  }>(
    `with taken as (delete from oauth_states where state_digest = $1
       returning project_id, user_id, session_digest, name, provider, sealed_verifier, expires_at)
     select p.org_id, t.project_id, t.user_id, t.session_digest, t.name, t.provider, t.sealed_verifier, t.expires_at > now() as live
       from taken t join projects p on p.id = t.project_id`,
    [digest(f.state)],
  );
  const r = rows[0];
  if (!r || !r.live || r.session_digest !== digest(f.sessionId))
    throw new FlowError("invalid_argument", STATE_REFUSED, { details: { field: "state" } });
  const scope = { orgId: r.org_id, projectId: r.project_id };
  const codeVerifier = await keyring.open(scope.orgId, verifierContext(scope, r.name), r.sealed_verifier);
  return { scope, userId: r.user_id, name: r.name, provider: r.provider, codeVerifier };
};

// ---- Accounts -----------------------------------------------------------------------------------

export interface GrantedAccount {
  scope: CredentialScope;
  name: string;
  provider: string;
  farId: string;
  farLabel: string;
  granterId: string;
  tokens: AccountTokens;
  expiresAtMs: number | null;
  refreshAfterMs: number | null;
}

const toDate = (ms: number | null | undefined): Date | null => (ms === null || ms === undefined ? null : new Date(ms));

/**
 * Stores a granted account under its name: a new one claims the name (refused when a credential
 * holds it); a reconnect must land on the same far-side id at the same provider, else it is refused
 * and the stored account is left as it was. A reconnect makes the account usable again.
 */
export const saveGrantedAccount = async (pool: Pool, keyring: Keyring, g: GrantedAccount): Promise<AccountMeta> => {
  const sealed = await keyring.seal(g.scope.orgId, tokenContext(g.scope, g.name), JSON.stringify(g.tokens));
  return withTransaction(pool, async (tx) => {
    await claimConnectionName(tx, g.scope.projectId, g.name, "account");
    const { rows: held } = await tx.query<{ provider: string; far_id: string; far_label: string }>(
      `select provider, far_id, far_label from accounts where project_id = $1 and name = $2 for update`,
      [g.scope.projectId, g.name],
    );
    const was = held[0];
    if (was && (was.provider !== g.provider || was.far_id !== g.farId))
      throw new FlowError(
        "conflict",
        `reconnecting ${JSON.stringify(g.name)} landed on a different account (${g.provider} ${JSON.stringify(g.farLabel)}) than the one connected (${was.provider} ${JSON.stringify(was.far_label)}): refused; sign in at the provider as that account, or remove ${g.name} and connect anew`,
        { details: { field: "name" } },
      );
    await tx.query(
      `insert into accounts (project_id, name, provider, far_id, far_label, granter_id, status, sealed, expires_at, refresh_after)
       values ($1, $2, $3, $4, $5, $6, 'active', $7, $8, $9)
       on conflict (project_id, name) do update set far_label = excluded.far_label, granter_id = excluded.granter_id, status = 'active',
         sealed = excluded.sealed, expires_at = excluded.expires_at, refresh_after = excluded.refresh_after, attempts = 0,
         last_error = null, sending_since = null, version = accounts.version + 1, connected_at = now(), updated_at = now()`,
      [
        g.scope.projectId,
        g.name,
        g.provider,
        g.farId,
        g.farLabel,
        g.granterId,
        Buffer.from(sealed),
        toDate(g.expiresAtMs),
        toDate(g.refreshAfterMs),
      ],
    );
    const list = await listAccounts(tx, g.scope.projectId);
    return list.find((a) => a.name === g.name)!;
  });
};

const openTokens = async (keyring: Keyring, scope: CredentialScope, name: string, sealed: Buffer): Promise<AccountTokens | undefined> => {
  const text = await keyring.open(scope.orgId, tokenContext(scope, name), sealed).catch((err: unknown) => {
    if (err instanceof FlowError) return undefined;
    throw err;
  });
  if (text === undefined) return undefined;
  try {
    const v = JSON.parse(text) as Partial<AccountTokens>;
    return typeof v.access_token === "string"
      ? { access_token: v.access_token, ...(typeof v.refresh_token === "string" ? { refresh_token: v.refresh_token } : {}) }
      : undefined;
  } catch {
    return undefined;
  }
};

/**
 * Forgets an account and frees its name; answers its provider and tokens (for revoking at the
 * provider after the local delete), or undefined when the project has no account of that name.
 */
export const forgetAccount = async (
  pool: Pool,
  keyring: Keyring,
  f: { scope: CredentialScope; name: string },
): Promise<{ provider: string; tokens: AccountTokens | undefined } | undefined> => {
  const { rows } = await pool.query<{ provider: string; sealed: Buffer }>(
    `with gone as (delete from connection_names where project_id = $1 and name = $2 and holder = 'account' returning project_id, name)
     select a.provider, a.sealed from accounts a join gone g using (project_id, name)`,
    [f.scope.projectId, f.name],
  );
  const r = rows[0];
  if (!r) return undefined;
  return { provider: r.provider, tokens: await openTokens(keyring, f.scope, f.name, r.sealed) };
};

// ---- Renewal ------------------------------------------------------------------------------------

export interface AccountKey {
  projectId: string;
  name: string;
}

/** Accounts whose renewal is due (active or refreshing, past `refresh_after`), oldest first. */
export const dueAccounts = async (db: Db, limit: number): Promise<AccountKey[]> => {
  const { rows } = await db.query<{ project_id: string; name: string }>(
    `select project_id, name from accounts where status in ('active', 'refreshing') and refresh_after <= now() order by refresh_after limit $1`,
    [limit],
  );
  return rows.map((r) => ({ projectId: r.project_id, name: r.name }));
};

/** Takes the account's refresh lease for `holder` (free, expired, or already its own); false when another holds it. */
export const takeRefreshLease = async (db: Db, key: AccountKey, f: { holder: string; ttlMs: number }): Promise<boolean> => {
  const { rowCount } = await db.query(
    `insert into account_refresh_leases (project_id, name, holder, expires_at) values ($1, $2, $3, now() + make_interval(secs => $4))
     on conflict (project_id, name) do update set holder = excluded.holder, expires_at = excluded.expires_at
       where account_refresh_leases.expires_at < now() or account_refresh_leases.holder = excluded.holder`,
    [key.projectId, key.name, f.holder, f.ttlMs / 1000],
  );
  return (rowCount ?? 0) > 0;
};

export const releaseRefreshLease = async (db: Db, key: AccountKey, holder: string): Promise<void> => {
  await db.query(`delete from account_refresh_leases where project_id = $1 and name = $2 and holder = $3`, [
    key.projectId,
    key.name,
    holder,
  ]);
};

export interface AccountForRefresh {
  scope: CredentialScope;
  provider: string;
  status: AccountStatus;
  version: number;
  attempts: number;
  due: boolean;
  /** A refresh was sent and its outcome never written (its sender died): the provider may have rotated. */
  sentUnrecorded: boolean;
  tokens: AccountTokens | undefined;
}

/** The account as it is now (read after taking the lease), tokens opened. */
export const readAccountForRefresh = async (db: Db, keyring: Keyring, key: AccountKey): Promise<AccountForRefresh | undefined> => {
  const { rows } = await db.query<{
    org_id: string;
    provider: string;
    status: AccountStatus;
    version: string;
    attempts: number;
    due: boolean;
    sent_unrecorded: boolean;
    sealed: Buffer;
  }>(
    `select p.org_id, a.provider, a.status, a.version, a.attempts, coalesce(a.refresh_after <= now(), false) as due,
            a.sending_since is not null as sent_unrecorded, a.sealed
       from accounts a join projects p on p.id = a.project_id where a.project_id = $1 and a.name = $2`,
    [key.projectId, key.name],
  );
  const r = rows[0];
  if (!r) return undefined;
  const scope = { orgId: r.org_id, projectId: key.projectId };
  return {
    scope,
    provider: r.provider,
    status: r.status,
    version: Number(r.version),
    attempts: r.attempts,
    due: r.due,
    sentUnrecorded: r.sent_unrecorded,
    tokens: await openTokens(keyring, scope, key.name, r.sealed),
  };
};

/**
 * Compare-and-set to `refreshing` before the request goes out, marking a send in flight until
 * applyRenewal writes its outcome; the new version, or undefined when the account changed.
 */
export const markRefreshing = async (db: Db, key: AccountKey, version: number): Promise<number | undefined> => {
  const { rows } = await db.query<{ version: string }>(
    `update accounts set status = 'refreshing', sending_since = now(), version = version + 1, updated_at = now()
      where project_id = $1 and name = $2 and version = $3 and status in ('active', 'refreshing') returning version`,
    [key.projectId, key.name, version],
  );
  return rows[0] ? Number(rows[0].version) : undefined;
};

/** Writes a renewal decision under the version read; false when the account changed meanwhile (nothing written). */
export const applyRenewal = async (
  db: Db,
  keyring: Keyring,
  f: { key: AccountKey; scope: CredentialScope; version: number; decision: RenewalDecision },
): Promise<boolean> => {
  const d = f.decision;
  const sealed = d.tokens
    ? Buffer.from(await keyring.seal(f.scope.orgId, tokenContext(f.scope, f.key.name), JSON.stringify(d.tokens)))
    : null;
  const { rowCount } = await db.query(
    `update accounts set status = $4, sealed = coalesce($5, sealed), refresh_after = $6,
       expires_at = case when $7::boolean then $8 else expires_at end, attempts = $9, last_error = $10,
       sending_since = null, version = version + 1, updated_at = now()
      where project_id = $1 and name = $2 and version = $3`,
    [
      f.key.projectId,
      f.key.name,
      f.version,
      d.status,
      sealed,
      toDate(d.refreshAfterMs),
      d.expiresAtMs !== undefined,
      toDate(d.expiresAtMs),
      d.attempts,
      d.lastError?.slice(0, 500) ?? null,
    ],
  );
  return (rowCount ?? 0) > 0;
};

/** Switches an account off (`disabled`): by hand, or because its granter left the project. */
export const disableAccount = async (db: Db, key: AccountKey): Promise<boolean> => {
  const { rowCount } = await db.query(
    `update accounts set status = 'disabled', refresh_after = null, version = version + 1, updated_at = now()
      where project_id = $1 and name = $2 and status <> 'disabled'`,
    [key.projectId, key.name],
  );
  return (rowCount ?? 0) > 0;
};

/**
 * Disables every account of the project whose granter is no longer a member of it (or was deleted):
 * a granter who leaves the project takes the grant's use with them. The leaving itself disables
 * them (migration 018's trigger on memberships); this is the second line, called where accounts are
 * read for use (the claim, an http node's dispatch), so it holds whichever way a membership ended.
 */
export const disableOrphanedAccounts = async (db: Db, projectId: string): Promise<number> => {
  const { rowCount } = await db.query(
    `update accounts a set status = 'disabled', refresh_after = null, version = version + 1, updated_at = now()
      where a.project_id = $1 and a.status <> 'disabled'
        and not exists (select 1 from memberships m where m.project_id = a.project_id and m.user_id = a.granter_id)`,
    [projectId],
  );
  return rowCount ?? 0;
};

/** A usable account's current access token, for the resolver (undefined: not held, or does not open). */
export const openAccountToken = async (
  keyring: Keyring,
  scope: CredentialScope,
  row: { name: string; sealed: Buffer },
): Promise<string | undefined> => (await openTokens(keyring, scope, row.name, row.sealed))?.access_token;
