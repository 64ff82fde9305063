import {
  createTestDatabase,
  createTestProject,
  createRun,
  mintId,
  startListener,
  withTransaction,
  waitFor,
  type Listener,
  type TestDatabase,
} from "@flowsvc/store";
import { Dispatcher, type DispatcherOptions } from "../dispatcher.js";
import type { FakeLauncher } from "./fake-launcher.js";

export interface TestStore {
  db: TestDatabase;
  projectId: string;
  /** The project's org's name (its project is named "p"). */
  orgName: string;
  /** A real LISTEN connection, already receiving (a NOTIFY sent now reaches its subscribers). */
  listener: Listener;
  close(): Promise<void>;
}

/** A test database with one project and a listener on it that is known to hear NOTIFY. */
export const openTestStore = async (): Promise<TestStore> => {
  const db = await createTestDatabase();
  const { projectId, orgId } = await createTestProject(db.pool);
  const listener = startListener(db.url, () => undefined);
  let heard = false;
  const off = listener.on("flowsvc_jobs", () => (heard = true));
  // LISTEN is issued after connecting: send until one arrives instead of guessing when it is up.
  await waitFor("the listener to hear NOTIFY", async () => {
    await db.pool.query(`select pg_notify('flowsvc_jobs', 'ping')`);
    return heard;
  });
  off();
  return {
    db,
    projectId,
    orgName: orgId,
    listener,
    async close() {
      await listener.close();
      await db.drop();
    },
  };
};

/**
 * A script run and its first job, as a submit writes them; `capabilities` are what the job needs.
 */
export const submitRun = async (store: TestStore, capabilities: string[] = []): Promise<{ runId: string; jobId: string }> => {
  const runId = mintId("run");
  return withTransaction(store.db.pool, async (tx) => {
    await createRun(tx, {
      id: runId,
      projectId: store.projectId,
      source: "true\n",
      filename: "t.sh",
      trusted: true,
      trigger: { type: "manual", sender: "test" },
      capabilities,
    });
    const { rows } = await tx.query<{ id: string }>(`select id from jobs where run_id = $1`, [runId]);
    return { runId, jobId: rows[0]!.id };
  });
};

export interface LogLine {
  obj: Record<string, unknown>;
  msg: string;
}

export interface TestDispatcher {
  dispatcher: Dispatcher;
  logs: LogLine[];
  warnings: LogLine[];
}

/**
 * A started dispatcher over fake launchers, each reporting to it as a real adapter would. The poll
 * is an hour unless given, so NOTIFY and the launchers' nudges are what move it; so is the lease,
 * so no lease expires in a test that does not expire it in the row, however slow the host.
 */
export const startDispatcher = async (
  store: TestStore,
  launchers: readonly FakeLauncher[],
  options: Partial<Pick<DispatcherOptions, "maxAttempts" | "leaseMs" | "intervals">> = {},
): Promise<TestDispatcher> => {
  const logs: LogLine[] = [];
  const warnings: LogLine[] = [];
  const dispatcher = new Dispatcher({
    pool: store.db.pool,
    listener: store.listener,
    launchers,
    leaseMs: 3_600_000,
    maxAttempts: 5,
    publicUrl: undefined,
    logger: {
      info: (obj, msg) => logs.push({ obj, msg }),
      warn: (obj, msg) => warnings.push({ obj, msg }),
      error: (obj, msg) => warnings.push({ obj, msg }),
    },
    ...options,
    intervals: { pollMs: 3_600_000, reapMs: 3_600_000, unservedCheckMs: 3_600_000, ...options.intervals },
  });
  for (const l of launchers)
    l.attach({
      agentExited: (req) => dispatcher.agentExited(req),
      launchFailed: (req, reason, retryAfterMs) => dispatcher.launchFailed(req, reason, retryAfterMs),
      slotFreed: () => dispatcher.slotFreed(),
    });
  await dispatcher.start();
  return { dispatcher, logs, warnings };
};
