// The connection pool and the one transaction helper every query module uses.
import pg from "pg";

export type PoolOptions = {
  max?: number;
  applicationName?: string;
  /** Told about errors on idle connections (a restarted server, a terminated backend). */
  log?: (msg: string) => void;
  /** Let the process exit while idle connections remain (tests, CLIs). Default false. */
  allowExitOnIdle?: boolean;
};

export function createPool(url: string, opts: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? "flowsvc",
    allowExitOnIdle: opts.allowExitOnIdle ?? false,
  });
  // An idle client's connection dying emits 'error' on the pool; unhandled, it would crash the
  // process. The pool has already discarded that client: note it and carry on.
  pool.on("error", (err) => opts.log?.(`postgres pool: idle connection lost: ${err.message}`));
  return pool;
}

/** Runs fn inside BEGIN/COMMIT on one client; ROLLBACK when fn throws. The client is always released. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("begin");
    const result = await fn(client);
    await client.query("commit");
    return result;
  } catch (err) {
    try {
      await client.query("rollback");
    } catch (rollbackErr) {
      // The connection is unusable (or mid-transaction): destroy it instead of pooling it.
      broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
    }
    throw err;
  } finally {
    client.release(broken);
  }
}
