// The connection pool and the one transaction helper every query module uses.
import { createHash } from "node:crypto";
import pg from "pg";

export type PoolOptions = {
  max?: number;
  applicationName?: string;
  /** Told about errors on idle connections (a restarted server, a terminated backend). */
  log?: (msg: string) => void;
  /** Let the process exit while idle connections remain (tests, CLIs). Default false. */
  allowExitOnIdle?: boolean;
};

/** Statement names by SQL text: `flowsvc-q-<digest>`, the same on every connection. */
const statementNames = new Map<string, string>();
const statementName = (text: string): string => {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `flowsvc-q-${createHash("sha256").update(text).digest("hex").slice(0, 24)}`;
    statementNames.set(text, name);
  }
  return name;
};

/**
 * A client that prepares every parameterised statement once per connection, named after its
 * text. Postgres plans an unnamed statement on each call; a prepared one is planned for its
 * parameters a few times, then its cached generic plan is kept when it costs no more. On this
 * service's short statements planning cost as much CPU as running them. The SQL texts are
 * constants of the store (values only ever travel as parameters), so the statements a connection
 * holds are bounded. Text without values (BEGIN, DDL, lock keys built here) stays unprepared, and
 * so does a query given as a config object (`{ text, values }`): a sweep that lists rows once per
 * pass (kube-runs.ts listMirroredRuns) is planned for its values each call, as a generic plan made
 * while the tables were small would scan them whole (docs/internals.md, "Generic plans made on
 * small tables").
 */
class PreparingClient extends pg.Client {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- pg.Client#query's overloads, passed through as they are
  override query(...args: unknown[]): any {
    const [config, values, callback] = args;
    const call =
      typeof config === "string" && Array.isArray(values) && values.length > 0
        ? [{ name: statementName(config), text: config, values }, callback]
        : args;
    return (super.query as (...a: unknown[]) => unknown).apply(this, call);
  }
}

/** See createPool: the error reaches the caller through its query; the event itself needs a listener. */
const absorbCheckedOutError = (): void => undefined;

export function createPool(url: string, opts: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    Client: PreparingClient,
    connectionString: url,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? "flowsvc",
    allowExitOnIdle: opts.allowExitOnIdle ?? false,
  });
  // An idle client's connection dying emits 'error' on the pool; unhandled, it would crash the
  // process. The pool has already discarded that client: note it and carry on.
  pool.on("error", (err) => opts.log?.(`postgres pool: idle connection lost: ${err.message}`));
  // A checked-out client has no listener of the pool's: its connection dying (a terminated
  // backend, a Postgres restart) emits 'error' on the client itself, even when a query in flight
  // already rejected with it, and an 'error' event nobody listens to kills the process. The query
  // in flight, or the next one, rejects and its caller handles that; release() then drops the
  // client (it is no longer queryable). So a listener for the client's whole life only absorbs it.
  pool.on("connect", (client) => client.on("error", absorbCheckedOutError));
  return pool;
}

/**
 * `pool.end()`, then the end of every connection it held. pg-pool answers end() as soon as it has
 * asked its clients to end, before their sockets closed: a Postgres stopped right after (the
 * embedded one at `flow server`'s stop) terminates those backends, and each logs as an idle
 * connection lost. Bounded: after `timeoutMs` it answers anyway (a stop never hangs on it).
 */
export const endPool = async (pool: pg.Pool, timeoutMs = 5000): Promise<void> => {
  const held = pool.totalCount;
  let timer: NodeJS.Timeout | undefined;
  let removed = 0;
  const allClosed = new Promise<void>((resolve) => {
    if (held === 0) resolve();
    pool.on("remove", () => {
      if (++removed >= held) resolve();
    });
    timer = setTimeout(resolve, timeoutMs);
    timer.unref();
  });
  await pool.end();
  await allClosed;
  clearTimeout(timer);
};

/** Postgres's deadlock_detected and serialization_failure: the transaction can simply run again. */
const RETRYABLE = new Set(["40P01", "40001"]);

/**
 * Runs fn inside BEGIN/COMMIT on one client; ROLLBACK when fn throws. The client is always
 * released. A transaction that Postgres aborted as a deadlock victim runs again (fn must only
 * touch the database), up to three times: waking one run while granting another's lease locks
 * two run rows, and such cycles are rare but legitimate.
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
  opts: TransactionOptions = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await transactionOnce(pool, fn, opts);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (attempt >= 3 || !code || !RETRYABLE.has(code)) throw err;
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * attempt));
    }
  }
}

export interface TransactionOptions {
  /**
   * SQL without parameters, run as the transaction's first statement in BEGIN's round trip (one
   * simple-protocol query): hot paths save a round trip. It must not contain user input.
   */
  begin?: string | undefined;
}

async function transactionOnce<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, opts: TransactionOptions): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(opts.begin ? `begin; ${opts.begin}` : "begin");
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
