import type { Pool, PoolClient } from "pg";

type Db = Pool | PoolClient;

export interface ConsoleSession {
  /** The digest of the API token that opened the session: the API authenticates with it. */
  tokenDigest: Buffer;
  /** The per-session CSRF token every console form posts back. */
  csrf: string;
  expiresAt: Date;
}

/**
 * Opens a session for the API token whose digest is `tokenDigest`: false when no such token exists.
 * Expired sessions are swept on the way (a login is rare; the index keeps the sweep cheap).
 */
export const createConsoleSession = async (
  db: Db,
  s: { digest: Buffer; tokenDigest: Buffer; csrf: string; ttlSecs: number },
): Promise<boolean> => {
  await db.query(`delete from console_sessions where expires_at < now()`);
  const { rowCount } = await db.query(
    `insert into console_sessions (digest, token_id, csrf, expires_at)
     select $1, k.id, $3, now() + make_interval(secs => $4) from api_tokens k where k.digest = $2`,
    [s.digest, s.tokenDigest, s.csrf, s.ttlSecs],
  );
  return rowCount === 1;
};

/** The live session behind a session id's digest, with its token's digest; undefined when unknown or expired. */
export const findConsoleSession = async (db: Db, digest: Buffer): Promise<ConsoleSession | undefined> => {
  const { rows } = await db.query<{ token_digest: Buffer; csrf: string; expires_at: Date }>(
    `select k.digest as token_digest, s.csrf, s.expires_at from console_sessions s join api_tokens k on k.id = s.token_id
      where s.digest = $1 and s.expires_at > now()`,
    [digest],
  );
  const r = rows[0];
  return r ? { tokenDigest: r.token_digest, csrf: r.csrf, expiresAt: r.expires_at } : undefined;
};

export const deleteConsoleSession = async (db: Db, digest: Buffer): Promise<void> => {
  await db.query(`delete from console_sessions where digest = $1`, [digest]);
};
