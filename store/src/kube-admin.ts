// Kubernetes mode's bootstrap `admin` user (controller/src/initial-admin.ts): in local mode `flow
// server`'s first start makes it (tenancy.ts bootstrapTenancy); in a cluster the controller does,
// at start, and hands its token to the operator through a Secret the caller writes before the
// transaction commits. `admin` is an admin of every project (ensureProject makes it one of each
// project made later), so the API and `flow status` work for the operators who run flowsvc.
import type { Pool, PoolClient } from "pg";
import { FlowError } from "@flowsvc/core";
import { mintId } from "./mint.js";
import { createToken } from "./users.js";
import { withTransaction } from "./pool.js";

/**
 * Serialises making `admin` against ensureProject (which takes it shared): a project made while
 * admin is being made is either seen by admin's membership insert or sees the committed admin.
 * The bytes of "flwadmn" (0x666c7761646d6e), recognisable in pg_locks.
 */
export const ADMIN_TENANCY_LOCK_KEY = "28829707615366510";

export const ADMIN_USER = "admin";

export interface ClusterAdminResult {
  /** True on the start that made `admin` (its token went to `handOver`), false when it existed. */
  created: boolean;
  /** How many projects admin was made an admin of (0 when it existed). */
  projects: number;
}

/**
 * Makes the user `admin` with a new `flw` token and an admin membership on every project, in one
 * transaction, unless it exists (then nothing). `handOver(token)` runs inside the transaction, after
 * every row is written and before the commit: when it throws, nothing is committed and the error
 * is the caller's. Two callers at once: the user name's unique index makes the second wait for the
 * first's commit and then find admin (or, when the first rolled back, make it itself).
 */
export const ensureClusterAdmin = async (pool: Pool, handOver: (token: string) => Promise<void>): Promise<ClusterAdminResult> =>
  withTransaction(pool, async (tx) => {
    await tx.query(`select pg_advisory_xact_lock(${ADMIN_TENANCY_LOCK_KEY})`);
    const userId = mintId("usr");
    const inserted = await tx.query(`insert into users (id, name) values ($1, $2) on conflict (name) do nothing`, [userId, ADMIN_USER]);
    if (inserted.rowCount === 0) return { created: false, projects: 0 };
    const { token } = await createToken(tx, { userId, label: "initial-admin" });
    const { rowCount } = await tx.query(
      `insert into memberships (project_id, user_id, role) select p.id, $1, 'admin' from projects p on conflict do nothing`,
      [userId],
    );
    await handOver(token);
    return { created: true, projects: rowCount ?? 0 };
  });

/** The id of `admin`, or undefined. */
const adminId = async (tx: PoolClient): Promise<string | undefined> =>
  (await tx.query<{ id: string }>(`select id from users where name = $1`, [ADMIN_USER])).rows[0]?.id;

/**
 * The recovery path (`flowsvc-controller admin-token`): a new token for `admin`; with
 * `revokeOthers`, every other token of admin is deleted in the same transaction. Refuses (not_found)
 * when admin does not exist.
 */
export const mintAdminToken = async (pool: Pool, opts: { revokeOthers: boolean }): Promise<{ token: string; revoked: number }> =>
  withTransaction(pool, async (tx) => {
    const userId = await adminId(tx);
    if (userId === undefined)
      throw new FlowError(
        "not_found",
        `there is no user ${ADMIN_USER}: the controller makes it at its first start (controller.initialAdmin.enabled)`,
      );
    const { token, id: tokenId } = await createToken(tx, { userId, label: "admin-token" });
    const revoked = opts.revokeOthers
      ? await tx.query(`delete from api_tokens where user_id = $1 and id <> $2`, [userId, tokenId])
      : undefined;
    return { token, revoked: revoked?.rowCount ?? 0 };
  });
