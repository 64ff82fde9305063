/**
 * People and their API tokens (users and api_tokens, migration 001): a project admin adds a user
 * with a role and a first token in one transaction (`flow user add`, ingest/src/routes/users.ts),
 * and every user makes, lists and revokes their own tokens (`flow token`, routes/tokens.ts). A
 * token is shown once, when it is made: only its SHA-256 digest is stored (mint.ts), so nothing
 * here can show it again. A revoked token's row is deleted, so the next request with it is 401.
 */
import type { Pool, PoolClient } from "pg";
import { FlowError, type ProjectRole } from "@flowsvc/core";
import { mintId, mintToken } from "./mint.js";
import { withTransaction } from "./pool.js";
import type { ProjectRef } from "./tenancy.js";

type Db = Pool | PoolClient;

/** A token as its owner lists it: never the token or its digest. */
export interface TokenInfo {
  id: string;
  label: string;
  created_at: Date;
  last_used_at: Date | null;
  /** True for the token (or the console session's token) that made this request. */
  current: boolean;
}

/** A token just made: the only time the token itself is known. */
export interface NewToken {
  id: string;
  label: string;
  created_at: Date;
  token: string;
}

const insertToken = async (db: Db, userId: string, label: string): Promise<NewToken> => {
  const { token, digest } = mintToken("flw");
  const id = mintId("tok");
  const { rows } = await db.query<{ created_at: Date }>(
    `insert into api_tokens (id, user_id, digest, label) values ($1, $2, $3, $4) returning created_at`,
    [id, userId, digest, label],
  );
  return { id, label, created_at: rows[0]!.created_at, token };
};

/**
 * Adds user `name` with `role` on the project and their first token labelled `label`, in one
 * transaction. conflict when a user of that name exists (nothing written): `flow member set` is how
 * an existing user joins another project.
 */
export const addUserWithToken = async (
  pool: Pool,
  f: { project: ProjectRef; name: string; role: ProjectRole; label: string },
): Promise<{ user: string; role: ProjectRole; token: NewToken }> =>
  withTransaction(pool, async (tx) => {
    const userId = mintId("usr");
    const { rowCount } = await tx.query(`insert into users (id, name) values ($1, $2) on conflict (name) do nothing`, [userId, f.name]);
    if (rowCount === 0)
      throw new FlowError("conflict", `a user named ${JSON.stringify(f.name)} exists on this server`, {
        hint: `give them a role here with \`flow member set ${f.name} --role ${f.role}\`; they make their own tokens with \`flow token create\``,
        details: { field: "name" },
      });
    await tx.query(`insert into memberships (project_id, user_id, role) values ($1, $2, $3)`, [f.project.projectId, userId, f.role]);
    const token = await insertToken(tx, userId, f.label);
    return { user: f.name, role: f.role, token };
  });

/** A new token for the user, labelled `label`. */
export const createToken = async (db: Db, f: { userId: string; label: string }): Promise<NewToken> => insertToken(db, f.userId, f.label);

/** The user's tokens, oldest first; `current` marks the one whose digest is `currentDigest`. */
export const listTokens = async (db: Db, f: { userId: string; currentDigest: Buffer }): Promise<TokenInfo[]> => {
  const { rows } = await db.query<TokenInfo>(
    `select id, label, created_at, last_used_at, digest = $2 as current from api_tokens where user_id = $1 order by created_at, id`,
    [f.userId, f.currentDigest],
  );
  return rows;
};

/**
 * Revokes (deletes) token `id` of the user; console sessions opened with it end with it (cascade).
 * not_found when the user has no such token (another user's token looks the same: its existence is
 * not revealed). The token making the request (`currentDigest`) is refused (conflict) unless `force`:
 * removing it logs the caller out.
 */
export const revokeToken = async (pool: Pool, f: { userId: string; id: string; currentDigest: Buffer; force: boolean }): Promise<void> =>
  withTransaction(pool, async (tx) => {
    const { rows } = await tx.query<{ digest: Buffer }>(`select digest from api_tokens where id = $1 and user_id = $2 for update`, [
      f.id,
      f.userId,
    ]);
    const row = rows[0];
    if (!row) throw new FlowError("not_found", `you have no token ${f.id}`, { hint: "list yours with `flow token ls`" });
    if (row.digest.equals(f.currentDigest) && !f.force)
      throw new FlowError("conflict", `${f.id} is the token making this request: removing it logs you out`, {
        hint: `log in with another token first, or pass --force (flow token rm ${f.id} --force)`,
        details: { field: "id" },
      });
    await tx.query(`delete from api_tokens where id = $1`, [f.id]);
  });
