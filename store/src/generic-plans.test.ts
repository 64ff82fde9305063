/**
 * Generic plans made on small tables must not read a table whole once it has grown. Every
 * parameterised statement is a named prepared statement (pool.ts), so Postgres keeps a generic plan
 * per connection after a few calls, and the emit and claim/finish transactions force one
 * (`plan_cache_mode = force_generic_plan`): a plan made on a new server's near-empty tables is the
 * one used when they hold millions of rows. Here each hot statement is run through the real store
 * function under force_generic_plan while the tables are near empty (the plan is made and cached
 * then, on this one connection), the tables get 20,000 rows of the shape that matters (no analyze,
 * as autovacuum may not have run in production either), and each function runs again, each of its
 * statements first run (and rolled back to a savepoint) with `explain analyze` of its cached plan,
 * in the state it meets there: no scan of a grown table may be a Seq Scan, or read more than a few
 * rows for a lookup of one run, event, lease or credential.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { createTestDatabase, createTestProject, createTestRun, type TestDatabase } from "./testing.js";
import { getEvent } from "./events.js";
import { gateAnsweredBy, lockRunForGate } from "./approval-gates.js";
import { openRunCredentials, readNameHoldings, setRunsCredentials } from "./credentials.js";
import { claimByToken, noteStartHint, runPlacements } from "./jobs.js";
import { resolveDueWait, suspendJob } from "./wake.js";
import { pendingEntries } from "./journal-entries.js";
import { resolveCallOfChild } from "./call-children.js";
import { releaseLease, releaseRunLeases } from "./locks.js";
import { completeRun, retryIfAllowed } from "./run-lifecycle.js";
import { graphRunsNeedingWork, jobStdoutTail, nodeJobSpec } from "./graph-runs.js";
import { listAgentJobs } from "./agents.js";
import { emitEvents, type EmitInput } from "./emit.js";
import { Keyring } from "./keyring.js";
import { createUserWithToken, findCallerInProject } from "./tenancy.js";
import { findIngestHook } from "./hooks.js";
import { listMirroredRuns } from "./kube-runs.js";
import { digestToken, mintToken } from "./mint.js";
import { runLineage } from "./sealed-journal.js";

const ROWS = 20_000;
/** The tables filled before the cached plans run again. */
const GROWN = new Set([
  "runs",
  "events",
  "journal",
  "jobs",
  "lock_leases",
  "signals",
  "credentials",
  "run_logs",
  "projects",
  "event_hooks",
  "memberships",
  "graph_nodes",
]);
/** At most this many rows read by one scan of a grown table (its own rows are a handful). */
const MAX_READ = 50;
/**
 * Statements that read many rows of a grown table by design, with why: the lease queue of one
 * group is read whole to grant its next waiter (grantNext), and the fill queues every lease in `g`.
 */
const BY_DESIGN = [/from lock_leases where project_id = \$1 and grp = \$2 and released_at is null order by id for update/];

let db: TestDatabase;
let client: pg.PoolClient;
let world: { projectId: string; orgId: string; runId: string; jobId: string };

/** One store call, after `setup` (SQL run first in its transaction, which is rolled back). */
interface Case {
  name: string;
  run: (tx: pg.PoolClient) => Promise<unknown>;
  setup?: string;
}
let cases: Case[] = [];

/** The client as the store functions see it: `before` sees each parameterised statement first, one at a time. */
const watched = (c: pg.PoolClient, before: (text: string, values: unknown[]) => Promise<void>): pg.PoolClient => {
  let chain: Promise<unknown> = Promise.resolve();
  return new Proxy(c, {
    get(target, key) {
      if (key === "query")
        return (text: unknown, values?: unknown) => {
          const next = chain.then(async () => {
            if (typeof text === "string" && Array.isArray(values) && values.length > 0) await before(text, values);
            return target.query(text as string, values as unknown[]);
          });
          chain = next.catch(() => undefined);
          return next;
        };
      const v: unknown = Reflect.get(target, key);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
};

/** Each case in a transaction that is rolled back: only its plans stay (prepared statements outlive it). */
const runCases = async (before: (c: Case, text: string, values: unknown[]) => Promise<void>): Promise<void> => {
  for (const c of cases) {
    await client.query(`begin; ${c.setup ?? ""}`);
    try {
      await c.run(watched(client, (text, values) => before(c, text, values)));
    } catch {
      // A refusal (near-empty tables, a row the fill lacks) is fine: the statements it ran were planned and checked all the same.
    } finally {
      await client.query("rollback");
    }
  }
};

const hookDelivery = (projectId: string): EmitInput => ({
  projectId,
  type: "push",
  key: null,
  payload: {},
  sourceRunId: null,
  trusted: true,
  hookName: "h",
  deliveryId: "d-1",
});

const lit = (s: string): string => pg.escapeLiteral(s);

/**
 * Grown: 20,000 rows each, of the project (runs, events, leases, credentials), of other runs, or of
 * other projects (a hook of the same name in each, the caller a member of each). Consistent by
 * construction, so without their foreign-key checks (session_replication_role: the test cluster's
 * user is its superuser), which cost more than the rows. On another connection: setting
 * session_replication_role drops the plans cached on the connection that sets it.
 */
const grow = async ({ projectId, orgId, runId }: typeof world): Promise<void> => {
  const n = `generate_series(1, ${ROWS}) i`;
  await db.pool.query(
    `set session_replication_role = replica;
     insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted, parent_run_id)
       select 'fill-run-' || i, project_id, workflow, 'parked', source, filename, interpreter, trigger, trusted, 'fill-run-' || (i + 1)
         from runs, ${n} where id = ${lit(runId)};
     insert into events (id, project_id, type, payload, source_run_id, hook_name, delivery_id, trusted)
       select 'fill-evt-' || i, ${lit(projectId)}, 'push', '{}', 'fill-run-' || i, 'h', 'fill-' || i, true from ${n};
     insert into journal (run_id, position, kind, name, ordinal, status, args, deadline)
       select 'fill-run-' || i, 0, (array['wait-event', 'call', 'sleep'])[i % 3 + 1], 'fill', 0, 'pending',
              jsonb_build_object('after_seq', -1, 'child_run_id', 'fill-run-' || (i - 1)), now() - interval '1 hour' from ${n};
     insert into jobs (id, run_id, status, kind, not_before) select 'fill-job-' || i, 'fill-run-' || i, 'queued', 'run', now() from ${n};
     insert into lock_leases (project_id, grp, run_id, position, granted_at)
       select ${lit(projectId)}, 'g', 'fill-run-' || i, -1, case when i = 1 then now() end from ${n};
     insert into signals (run_id, name, payload) select 'fill-run-' || i, 'approve', '{}' from ${n};
     insert into connection_names (project_id, name, holder) select ${lit(projectId)}, 'fill-' || i, 'credential' from ${n};
     insert into credentials (project_id, name, kind, sealed) select ${lit(projectId)}, 'fill-' || i, 'bearer', '\\x00' from ${n};
     insert into run_logs (run_id, job_id, stream, data) select 'fill-run-' || i, 'fill-job-' || i, 'stdout', 'x' from ${n};
     insert into projects (id, org_id, name) select 'fill-prj-' || i, ${lit(orgId)}, 'fill-' || i from ${n};
     insert into event_hooks (project_id, name, mode, secret_digest) select 'fill-prj-' || i, 'h', 'token', '\\x00' from ${n};
     insert into memberships (project_id, user_id, role) select 'fill-prj-' || i, 'usr-t', 'viewer' from ${n};
     insert into graph_nodes (run_id, node_id, type, ord, status, job_id) select 'fill-run-' || i, 'n', 'code', 0, 'success', 'fill-job-' || i from ${n};
     reset session_replication_role`,
  );
};

before(async () => {
  db = await createTestDatabase();
  client = await db.pool.connect();
  // No autovacuum on the grown tables: its ANALYZE would make the plans again with the new statistics
  // (as it does in production, some time after the tables grew; until then the old plans run).
  await client.query([...GROWN].map((t) => `alter table ${t} set (autovacuum_enabled = false)`).join("; "));
  await client.query("set plan_cache_mode = force_generic_plan");
  const { projectId, orgId } = await createTestProject(db.pool);
  const runId = await createTestRun(db.pool, projectId);
  const { rows } = await db.pool.query<{ id: string }>(`select id from jobs where run_id = $1`, [runId]);
  world = { projectId, orgId, runId, jobId: rows[0]!.id };
  const keyring = await Keyring.create(db.pool, randomBytes(32));
  const { token } = mintToken("job");
  const digest = digestToken(token);
  const caller = mintToken("flw").digest;
  await createUserWithToken(db.pool, { userId: "usr-t", tokenId: "tok-t" }, { name: "u", projectId, role: "admin", tokenDigest: caller });

  cases = [
    { name: "findCallerInProject", run: (tx) => findCallerInProject(tx, caller, orgId, "p") },
    { name: "findIngestHook", run: (tx) => findIngestHook(tx, orgId, "p", "h") },
    { name: "getEvent", run: (tx) => getEvent(tx, projectId, "evt-none") },
    { name: "lockRunForGate", run: (tx) => lockRunForGate(tx, projectId, runId) },
    { name: "gateAnsweredBy", run: (tx) => gateAnsweredBy(tx, runId, "approve", null) },
    { name: "setRunsCredentials", run: (tx) => setRunsCredentials(tx, [{ runId, declared: { TOKEN: "tok" } }]) },
    { name: "openRunCredentials", run: (tx) => openRunCredentials(tx, keyring, runId, { orgId, projectId }) },
    { name: "readNameHoldings", run: (tx) => readNameHoldings(tx, projectId, ["tok"]) },
    {
      name: "claimByToken (one-statement start)",
      run: (tx) => {
        noteStartHint(digest, {
          run: { id: runId, project_id: projectId, workflow: "", tags: [], trigger: {}, trusted: true },
          org: "o",
          project: "p",
        });
        return claimByToken(tx, { digest, agentId: "agent", leaseMs: 60_000, publicUrl: undefined });
      },
      setup: `update jobs set status = 'dispatched', token_digest = '\\x${digest.toString("hex")}' where run_id = ${lit(runId)}`,
    },
    { name: "suspendJob", run: (tx) => suspendJob(tx, world.jobId, runId) },
    { name: "resolveDueWait", run: (tx) => resolveDueWait(tx, runId, 0) },
    { name: "pendingEntries", run: (tx) => pendingEntries(tx, runId, ["signal", "wait-event"]) },
    { name: "resolveCallOfChild", run: (tx) => resolveCallOfChild(tx, runId) },
    { name: "releaseLease", run: (tx) => releaseLease(tx, projectId, "g", runId) },
    { name: "releaseRunLeases", run: (tx) => releaseRunLeases(tx, runId) },
    { name: "completeRun", run: (tx) => completeRun(tx, runId, { status: "cancelled", reason: "test" }, undefined) },
    {
      name: "retryIfAllowed",
      run: (tx) => retryIfAllowed(tx, runId, world.jobId, "exit 1"),
      setup: `update runs set retry = '{"attempts": 3, "backoff_ms": 0}' where id = ${lit(runId)}`,
    },
    { name: "jobStdoutTail", run: (tx) => jobStdoutTail(tx, world.jobId) },
    { name: "nodeJobSpec", run: (tx) => nodeJobSpec(tx, world.jobId) },
    { name: "listAgentJobs", run: (tx) => listAgentJobs(tx, "usr-t") },
    { name: "runPlacements", run: (tx) => runPlacements(tx, [runId]) },
    {
      name: "runLineage",
      run: (tx) => runLineage(tx, runId),
      // Once the tables are grown, the run is a rerun of a filled one: the recursion takes one step up.
      setup: `update runs set rerun_of = (select id from runs where id = 'fill-run-1') where id = ${lit(runId)}`,
    },
    // The graph driver's poll, four times a second in every controller: what is in flight, never the history.
    { name: "graphRunsNeedingWork", run: (tx) => graphRunsNeedingWork(tx, "driver-elsewhere") },
    {
      name: "emitEvents (a hook delivery, then its redelivery)",
      run: async (tx) => {
        await emitEvents(tx, [hookDelivery(projectId)]);
        await emitEvents(tx, [hookDelivery(projectId)]);
      },
    },
    {
      name: "emitEvents (a waiter and a cancel_on run)",
      run: (tx) => emitEvents(tx, [{ projectId, type: "x", key: null, payload: {}, sourceRunId: null, trusted: true }]),
      setup: `update runs set cancel_on = '{x}' where id = ${lit(runId)};
     insert into journal (run_id, position, kind, name, ordinal, status, args) values (${lit(runId)}, 0, 'wait-event', 'x', 0, 'pending', '{"after_seq": -1}')`,
    },
  ];
  // The tables are near empty: each case plans its statements now, as a new server does.
  await runCases(() => Promise.resolve());
  await grow(world);
});

after(async () => {
  client?.release();
  await db?.drop();
});

/** A value as the SQL literal Postgres would have parsed from node-postgres' text form of it. */
const literal = (v: unknown, type: string): string => {
  if (v === null || v === undefined) return `null::${type}`;
  const text = (x: unknown): string => {
    if (Buffer.isBuffer(x)) return `\\x${x.toString("hex")}`;
    if (x instanceof Date) return x.toISOString();
    if (Array.isArray(x))
      return `{${x.map((e) => (e === null || e === undefined ? "NULL" : `"${text(e).replace(/[\\"]/g, "\\$&")}"`)).join(",")}}`;
    if (typeof x === "string") return x;
    return typeof x === "number" || typeof x === "boolean" || typeof x === "bigint" ? String(x) : JSON.stringify(x);
  };
  return `${pg.escapeLiteral(text(v))}::${type}`;
};

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Rows": number;
  "Actual Loops": number;
  "Rows Removed by Filter"?: number;
  "Rows Removed by Index Recheck"?: number;
  Plans?: PlanNode[];
}

const scans = (n: PlanNode, out: PlanNode[] = []): PlanNode[] => {
  if (n["Relation Name"] !== undefined) out.push(n);
  for (const k of n.Plans ?? []) scans(k, out);
  return out;
};

/** What each scan of a grown table did when the statement's cached plan ran, as `BAD ...` when it read the table. */
const grownScans = (plan: PlanNode): string[] =>
  scans(plan)
    .filter((s) => GROWN.has(s["Relation Name"]!))
    .map((s) => {
      const read = (s["Actual Rows"] + (s["Rows Removed by Filter"] ?? 0) + (s["Rows Removed by Index Recheck"] ?? 0)) * s["Actual Loops"];
      const bad = s["Node Type"] === "Seq Scan" || read > MAX_READ;
      return `${bad ? "BAD " : ""}${s["Node Type"]} on ${s["Relation Name"]}${s["Index Name"] ? ` using ${s["Index Name"]}` : ""}: ${read} rows read`;
    });

/**
 * The statement's cached plan, run with `explain analyze` where the function is about to run it (in
 * a savepoint rolled back, so the function then runs it on the state it expects); undefined when
 * the connection had not prepared it (not planned on the near-empty tables).
 */
const explainCached = async (text: string, values: unknown[]): Promise<PlanNode | undefined> => {
  const { rows: prepared } = await client.query<{ name: string; types: string[] }>(
    `select name, parameter_types::text[] as types from pg_prepared_statements where statement = $1`,
    [text],
  );
  const p = prepared[0];
  if (!p) return undefined;
  const args = values.map((v, i) => literal(v, p.types[i]!)).join(", ");
  await client.query("savepoint explained");
  try {
    const { rows } = await client.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(
      `explain (analyze, format json) execute ${pg.escapeIdentifier(p.name)}(${args})`,
    );
    return rows[0]!["QUERY PLAN"][0]!.Plan;
  } finally {
    await client.query("rollback to savepoint explained");
  }
};

test("every hot statement keeps the plan it made on near-empty tables to a few rows once they hold 20,000", async () => {
  const checked = new Set<string>();
  const ran = new Set<string>();
  const failures: string[] = [];
  await runCases(async (c, text, values) => {
    ran.add(c.name);
    if (checked.has(text) || BY_DESIGN.some((re) => re.test(text))) return;
    const plan = await explainCached(text, values);
    if (!plan) return;
    checked.add(text);
    const found = grownScans(plan);
    if (found.some((s) => s.startsWith("BAD ")))
      failures.push(`${c.name}: ${text.replace(/\s+/g, " ").slice(0, 200)}\n    ${found.join("\n    ")}`);
  });
  assert.deepEqual(
    cases.map((c) => c.name).filter((n) => !ran.has(n)),
    [],
    "every case ran a statement",
  );
  assert.ok(checked.size >= 30, `only ${checked.size} statements were checked`);
  assert.deepEqual(failures, [], `plans that read a grown table:\n${failures.join("\n")}`);
});

test("a sweep (a list read once per pass) is planned for its values on each call, never prepared", async () => {
  await listMirroredRuns(client, new Date(Date.now() - 60_000));
  const { rows } = await client.query<{ n: number }>(
    "select count(*)::int as n from pg_prepared_statements where statement like '%r.finished_at > $1%'",
  );
  assert.equal(rows[0]!.n, 0);
});
