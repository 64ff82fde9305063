/**
 * The crash and fault suite (issue 15, item 4): a workload of step-heavy scripts, hook deliveries
 * and handler chains against a real `flow server` on its embedded Postgres, while the server is
 * killed with SIGKILL and restarted on the same data dir, agents are killed with SIGKILL and the
 * server's Postgres connections are terminated. Then everything acknowledged is counted:
 *
 * - runs lost: a submitted run (201) that did not succeed, a hook delivery's (202) handler run
 *   that is missing or did not succeed, or the next link of its chain likewise;
 * - steps run twice: a step body appends one line per real execution to a file; more than one line
 *   for a run's step, or a line count that differs from the journal's done entries, is counted.
 *   One case is inherent and counted apart (`stepsRerunAfterAgentKill`): the soak SIGKILLed the
 *   agent that ran the body before the agent could record it, so the replay ran it again with the
 *   same FLOW_IDEMPOTENCY_KEY (at-least-once for a body; the key is how a body applies once);
 * - 202s without an event: a delivery answered 202 whose event is not in the database;
 * - events delivered twice to a handler: more than one run of a handler for one event.
 *
 * `npm run soak` runs the full version (test/src/soak/main.ts); test/src/soak/soak.test.ts a short one.
 */
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { copyFile, readFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { startTestServer, type TestServer } from "../support/server.js";
import { scriptDir } from "../support/script-dir.js";
import { alive, waitFor } from "../support/wait.js";

export interface SoakOptions {
  /** Server SIGKILLs (each followed by a restart on the same data dir). */
  serverKills: number;
  /** Agent SIGKILLs. */
  agentKills: number;
  /** Rounds of pg_terminate_backend of the server's connections. */
  terminations: number;
  /** Step-heavy scripts submitted over the workload. */
  scripts: number;
  /** Steps per script. */
  steps: number;
  /** Hook deliveries (each starts a chain of two handler runs). */
  deliveries: number;
  /** Over how long the workload and the faults are spread. */
  workloadMs: number;
  /** Bound on the workload and its faults (submits retried while the server is down give up then). */
  deadlineMs: number;
  /** Bound on the wait, after the last fault, for everything acknowledged to finish; what has not is counted. */
  settleMs: number;
  log?: (line: string) => void;
  /** A directory to copy the data dir's server.log and postgres.log to before it is removed. */
  keepLogs?: string;
}

export interface SoakFigures {
  runsLost: number;
  stepsRunTwice: number;
  /** A body ran again because the soak killed its agent before the agent recorded it; same idempotency key. */
  stepsRerunAfterAgentKill: number;
  acceptedWithoutEvent: number;
  eventsDeliveredTwice: number;
  /** What was done, for the report. */
  scriptsAcknowledged: number;
  deliveriesAcknowledged: number;
  handlerRuns: number;
  stepExecutions: number;
  serverKills: number;
  agentKills: number;
  backendsTerminated: number;
  requestsRefusedWhileDown: number;
  wallMs: number;
  /** Each lost or doubled thing, named, so a non-zero figure can be chased. */
  details: string[];
}

const BASE = "/api/v1/orgs/default/projects/default";

/** A connection to the server's embedded Postgres, as the superuser (port from postmaster.pid: it changes per start). */
const embeddedPg = async (dataDir: string): Promise<pg.Client> => {
  const pid = readFileSync(join(dataDir, "pg", "postmaster.pid"), "utf8").split("\n");
  const password = readFileSync(join(dataDir, "pg-password"), "utf8").trim();
  const client = new pg.Client({ host: "127.0.0.1", port: Number(pid[3]), user: "postgres", password, database: "flowsvc" });
  client.on("error", () => undefined);
  await client.connect();
  return client;
};

/** Runs `sql` on a fresh connection to the embedded Postgres; retries while the server restarts it. */
const query = async <R extends pg.QueryResultRow>(dataDir: string, sql: string, params: unknown[] = []): Promise<R[]> => {
  for (let attempt = 0; ; attempt++) {
    try {
      const c = await embeddedPg(dataDir);
      try {
        return (await c.query<R>(sql, params)).rows;
      } finally {
        await c.end().catch(() => undefined);
      }
    } catch (err) {
      if (attempt >= 50) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
};

interface Api {
  (method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: unknown }>;
}

const apiOf =
  (server: TestServer): Api =>
  async (method, path, body, headers = {}) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json", ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: res.status, body: parsed };
  };

/**
 * The line a step body appends to the effects file on each real execution: `<run> <step> <agent pid>
 * <idempotency key>`. The script's shell fills in the run and the agent (a step body gets neither);
 * the body's own shell the key (a script does not see it).
 */
const effect = (effects: string, step: string): string =>
  `flow step ${step} -- sh -c "echo $FLOW_WORKFLOW_ID ${step} $FLOW_AGENT_PID \\$FLOW_IDEMPOTENCY_KEY >> ${effects}"\n`;

/** A script of `steps` steps; each step body appends its effect line: one line per real execution. */
const stepScript = (effects: string, steps: number): string => Array.from({ length: steps }, (_, i) => effect(effects, `s${i}`)).join("");

/** Handler h1 (on soak.a) records a step and emits soak.b; h2 (on soak.b) records a step. */
const setUp = async (api: Api, effects: string): Promise<string> => {
  const hook = await api("PUT", `${BASE}/event-hooks/soak`, { event_type: "soak.a" });
  if (hook.status !== 201) throw new Error(`creating the hook answered ${hook.status}: ${JSON.stringify(hook.body)}`);
  const record = effect(effects, "record");
  const handlers: Array<[string, string, string]> = [
    ["h1", "soak.a", `${record}flow emit soak.b --payload "{\\"from\\":\\"$FLOW_WORKFLOW_ID\\"}" > /dev/null\n`],
    ["h2", "soak.b", record],
  ];
  for (const [name, on, source] of handlers) {
    const res = await api("PUT", `${BASE}/handlers/${name}`, { on: [on], reaction: { kind: "script", source, filename: `${name}.sh` } });
    if (res.status >= 300) throw new Error(`creating handler ${name} answered ${res.status}: ${JSON.stringify(res.body)}`);
  }
  return (hook.body as { secret: string }).secret;
};

/** The server's agent processes (its children named agent), read from /proc. */
const agentsOf = (serverPid: number): number[] =>
  readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === serverPid;
      } catch {
        return false;
      }
    })
    .filter((pid) => /agent-image\/dist\/main\.js/.test(readFileSync(`/proc/${pid}/cmdline`, "latin1")));

interface Tally {
  runs: string[];
  /** The agents the soak killed. */
  killedAgents: number[];
  deliveries: string[];
  refusedWhileDown: number;
  serverKills: number;
  agentKills: number;
  terminated: number;
}

/** Submits with an idempotency key until acknowledged: a submit that fails while the server is down is sent again. */
const submitUntilAcknowledged = async (api: Api, source: string, tally: Tally, deadline: number): Promise<void> => {
  const key = randomUUID();
  while (Date.now() < deadline) {
    const res = await api("POST", `${BASE}/runs`, { kind: "script", source, filename: "soak.sh", idempotency_key: key }).catch(
      () => undefined,
    );
    if (res && (res.status === 201 || res.status === 200)) {
      tally.runs.push((res.body as { id: string }).id);
      return;
    }
    tally.refusedWhileDown++;
    await new Promise((r) => setTimeout(r, 100));
  }
};

/**
 * One delivery, sent again (as a sender does) until answered 202 or the deadline passes; each 202
 * is counted. A resend after an unanswered try may record the event twice (token hooks have no
 * delivery id): each copy then has its own chain, so nothing is counted twice for it.
 */
const deliverUntilAcknowledged = async (api: Api, secret: string, tally: Tally, deadline: number): Promise<void> => {
  const id = randomUUID();
  while (Date.now() < deadline) {
    const res = await api("POST", "/api/v1/hooks/default/default/soak", { id }, { "x-flow-hook-secret": secret, authorization: "" }).catch(
      () => undefined,
    );
    if (res?.status === 202) {
      tally.deliveries.push(id);
      return;
    }
    tally.refusedWhileDown++;
    await new Promise((r) => setTimeout(r, 100));
  }
};

/** Spreads `n` actions over `ms`, one after another, the first after one interval (faults meet work already in flight). */
const spread = async (n: number, ms: number, act: (i: number) => Promise<void>): Promise<void> => {
  for (let i = 0; i < n; i++) {
    await new Promise((r) => setTimeout(r, ms / Math.max(1, n)));
    await act(i);
  }
};

const terminateBackends = async (dataDir: string): Promise<number> => {
  const rows = await query<{ n: number }>(
    dataDir,
    `select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
      where datname = 'flowsvc' and pid <> pg_backend_pid() and backend_type = 'client backend'`,
  );
  return rows[0]?.n ?? 0;
};

const killAnAgent = (server: TestServer, tally: Tally): void => {
  const pid = agentsOf(server.process.pid!)[0];
  if (pid === undefined) return;
  try {
    process.kill(pid, "SIGKILL");
    tally.agentKills++;
    tally.killedAgents.push(pid);
  } catch {
    // gone already
  }
};

/** The faults, spread over the workload: server kills (with restarts), agent kills, backend terminations. */
const injectFaults = async (server: TestServer, opts: SoakOptions, tally: Tally, workloadMs: number): Promise<void> => {
  const log = opts.log ?? (() => undefined);
  const total = opts.serverKills + opts.agentKills + opts.terminations;
  const plan = [
    ...Array<"server">(opts.serverKills).fill("server"),
    ...Array<"agent">(opts.agentKills).fill("agent"),
    ...Array<"pg">(opts.terminations).fill("pg"),
  ];
  // Interleaved (server, agent, pg, server, ...) so every kind of fault meets the workload in flight.
  const order = interleave(plan);
  await spread(total, workloadMs, async (i) => {
    const fault = order[i]!;
    if (fault === "server") {
      await server.kill("SIGKILL");
      tally.serverKills++;
      await server.restart();
      log(`server killed and restarted (${tally.serverKills}/${opts.serverKills})`);
    } else if (fault === "agent") {
      killAnAgent(server, tally);
      log(`agent killed (${tally.agentKills})`);
    } else {
      tally.terminated += await terminateBackends(server.dataDir);
      log(`Postgres backends terminated (${tally.terminated} so far)`);
    }
  });
};

/** a a a b b c -> a b c a b a */
const interleave = <T>(items: T[]): T[] => {
  const groups = new Map<T, T[]>();
  for (const x of items) groups.set(x, [...(groups.get(x) ?? []), x]);
  const out: T[] = [];
  while (out.length < items.length) for (const g of groups.values()) if (g.length) out.push(g.pop()!);
  return out;
};

interface Row {
  id: string;
  status: string;
  error: string | null;
  handler_name: string | null;
  event_id: string | null;
}

/** Reads what the database holds of the soak: runs, the hook's events, the handlers' events, step journal entries. */
const snapshot = async (dataDir: string) => {
  const runs = await query<Row>(dataDir, `select id, status, error, handler_name, event_id from runs`);
  const aEvents = await query<{ id: string; delivery: string }>(
    dataDir,
    `select id, payload->'body'->>'id' as delivery from events where type = 'soak.a'`,
  );
  const bEvents = await query<{ id: string; source_run_id: string }>(dataDir, `select id, source_run_id from events where type = 'soak.b'`);
  const journal = await query<{ run_id: string; name: string; n: number }>(
    dataDir,
    `select run_id, name, count(*)::int as n from journal where kind = 'step' and status = 'done' group by run_id, name`,
  );
  return { runs, aEvents, bEvents, journal };
};
type Snapshot = Awaited<ReturnType<typeof snapshot>>;

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

/** Everything acknowledged has come to rest: every submitted run and every chain link is terminal. */
const settled = (snap: Snapshot, tally: Tally): boolean => {
  const byId = new Map(snap.runs.map((r) => [r.id, r]));
  if (!tally.runs.every((id) => TERMINAL.has(byId.get(id)?.status ?? ""))) return false;
  const handlerRuns = snap.runs.filter((r) => r.handler_name !== null);
  if (!handlerRuns.every((r) => TERMINAL.has(r.status))) return false;
  const h1 = new Set(handlerRuns.filter((r) => r.handler_name === "h1").map((r) => r.event_id));
  const h2 = new Set(handlerRuns.filter((r) => r.handler_name === "h2").map((r) => r.event_id));
  const delivered = new Set(snap.aEvents.map((e) => e.delivery));
  return (
    tally.deliveries.every((d) => delivered.has(d)) &&
    snap.aEvents.every((e) => h1.has(e.id)) &&
    snap.bEvents.every((e) => h2.has(e.id)) &&
    handlerRuns.every((r) => r.handler_name !== "h1" || r.status !== "succeeded" || snap.bEvents.some((e) => e.source_run_id === r.id))
  );
};

/** The real executions of each `<run> <step>`: the agent and the idempotency key of each. */
type Executions = Map<string, Array<{ agent: number; key: string }>>;

const executions = async (effects: string): Promise<Executions> => {
  const text = await readFile(effects, "utf8").catch(() => "");
  const n: Executions = new Map();
  for (const line of text.split("\n").filter(Boolean)) {
    const [run = "", step = "", agent = "", key = ""] = line.split(" ");
    n.set(`${run} ${step}`, [...(n.get(`${run} ${step}`) ?? []), { agent: Number(agent), key }]);
  }
  return n;
};

/**
 * A body run twice because its first agent was SIGKILLed before recording it: every execution but
 * the last ran on an agent the soak killed, all under one idempotency key, and the journal has it once.
 */
const rerunAfterAgentKill = (runs: Array<{ agent: number; key: string }>, recorded: number, killed: readonly number[]): boolean =>
  recorded === 1 &&
  runs.length === 2 &&
  killed.includes(runs[0]!.agent) &&
  runs[1]!.agent !== runs[0]!.agent &&
  runs[0]!.key !== "" &&
  runs[0]!.key === runs[1]!.key;

interface Counts {
  runsLost: number;
  stepsRunTwice: number;
  stepsRerunAfterAgentKill: number;
  acceptedWithoutEvent: number;
  eventsDeliveredTwice: number;
}

/** Counts one kind of figure, naming each case in `details`. */
const counter = (counts: Counts, details: string[]) => (figure: keyof Counts, detail: string) => {
  counts[figure]++;
  details.push(detail);
};

const runDetail = (r: Row | undefined): string => (r ? `${r.status}${r.error ? ` (${r.error.slice(0, 300)})` : ""}` : "missing");

/** The handler chain of each acknowledged delivery: its event, h1's run, the soak.b event h1 emitted, h2's run. */
const countChains = (snap: Snapshot, tally: Tally, count: ReturnType<typeof counter>): void => {
  const delivered = new Map(snap.aEvents.map((e) => [e.delivery, e.id]));
  const link = (handler: string, event: string): Row | undefined => {
    const runs = snap.runs.filter((r) => r.handler_name === handler && r.event_id === event);
    if (runs.length > 1) count("eventsDeliveredTwice", `event ${event} started ${runs.length} runs of ${handler}`);
    const ok = runs.find((r) => r.status === "succeeded");
    if (!ok) count("runsLost", `event ${event}: no succeeded run of ${handler} (${runs.map(runDetail).join(", ") || "none"})`);
    return ok;
  };
  for (const d of tally.deliveries) {
    const event = delivered.get(d);
    if (!event) {
      count("acceptedWithoutEvent", `delivery ${d} answered 202, no event`);
      continue;
    }
    const h1 = link("h1", event);
    const emitted = h1 ? snap.bEvents.filter((e) => e.source_run_id === h1.id) : [];
    // A replayed emit recorded twice would start a second h2 run for one delivery.
    if (h1 && emitted.length !== 1) count("eventsDeliveredTwice", `h1 run ${h1.id} emitted ${emitted.length} soak.b events`);
    if (emitted[0]) link("h2", emitted[0].id);
  }
};

const countFigures = (snap: Snapshot, tally: Tally, effects: Executions, details: string[]): Counts => {
  const counts: Counts = { runsLost: 0, stepsRunTwice: 0, stepsRerunAfterAgentKill: 0, acceptedWithoutEvent: 0, eventsDeliveredTwice: 0 };
  const count = counter(counts, details);
  const byId = new Map(snap.runs.map((r) => [r.id, r]));
  for (const id of tally.runs)
    if (byId.get(id)?.status !== "succeeded") count("runsLost", `run ${id} acknowledged, now ${runDetail(byId.get(id))}`);
  countChains(snap, tally, count);
  const journal = new Map(snap.journal.map((j) => [`${j.run_id} ${j.name}`, j.n]));
  for (const [key, runs] of effects) {
    const recorded = journal.get(key) ?? 0;
    const n = runs.length;
    const detail = `step ${key} ran ${n} times (${JSON.stringify(runs)}), journal has ${recorded}`;
    if (rerunAfterAgentKill(runs, recorded, tally.killedAgents)) count("stepsRerunAfterAgentKill", detail);
    else if (n > 1 || (recorded > 0 && n !== recorded)) count("stepsRunTwice", detail);
  }
  return counts;
};

/** Runs the soak and counts; the server and its data dir are removed at the end. */
export const runSoak = async (opts: SoakOptions): Promise<SoakFigures> => {
  const t0 = Date.now();
  const log = opts.log ?? (() => undefined);
  const dir = await scriptDir("flowsvc-soak-");
  const effects = join(dir, "effects");
  // The server's default lease (15 s): the soak is about kills, not about leases a loaded host's pauses let lapse.
  const server = await startTestServer({ embedded: true, agents: 4, leaseMs: 15_000 });
  const api = apiOf(server);
  const tally: Tally = { runs: [], killedAgents: [], deliveries: [], refusedWhileDown: 0, serverKills: 0, agentKills: 0, terminated: 0 };
  try {
    const secret = await setUp(api, effects);
    const deadline = Date.now() + opts.deadlineMs;
    const { workloadMs } = opts;
    await Promise.all([
      spread(opts.scripts, workloadMs, () => submitUntilAcknowledged(api, stepScript(effects, opts.steps), tally, deadline)),
      spread(opts.deliveries, workloadMs, () => deliverUntilAcknowledged(api, secret, tally, deadline)),
      injectFaults(server, opts, tally, workloadMs),
    ]);
    log(`workload sent: ${tally.runs.length} runs, ${tally.deliveries.length} deliveries acknowledged; waiting for them to finish`);
    await waitFor(
      "everything acknowledged to finish",
      async () => settled(await snapshot(server.dataDir), tally),
      opts.settleMs,
      500,
    ).catch((err: Error) => log(`${err.message}: counting what there is`));
    const snap = await snapshot(server.dataDir);
    const effectLines = await executions(effects);
    const details = await unfinished(server, snap);
    const figures = countFigures(snap, tally, effectLines, details);
    return {
      ...figures,
      scriptsAcknowledged: tally.runs.length,
      deliveriesAcknowledged: tally.deliveries.length,
      handlerRuns: snap.runs.filter((r) => r.handler_name !== null).length,
      stepExecutions: [...effectLines.values()].reduce((a, b) => a + b.length, 0),
      serverKills: tally.serverKills,
      agentKills: tally.agentKills,
      backendsTerminated: tally.terminated,
      requestsRefusedWhileDown: tally.refusedWhileDown,
      wallMs: Date.now() - t0,
      details,
    };
  } finally {
    if (opts.keepLogs) {
      for (const f of ["server.log", "postgres.log"])
        await copyFile(join(server.dataDir, f), join(opts.keepLogs, f)).catch(() => undefined);
    }
    await stopAll(server);
  }
};

/** Stops the server and any agent a kill left behind, then removes the data dir (the server's stop). */
const stopAll = async (server: TestServer): Promise<void> => {
  const agents = server.process.pid ? agentsOf(server.process.pid) : [];
  await server.stop();
  await waitFor("the agents to end", () => agents.every((pid) => !alive(pid)), 30_000).catch(() => undefined);
};

/** The jobs of runs that did not finish, and the server's last output: where a stuck run is to be chased. */
const unfinished = async (server: TestServer, snap: Snapshot): Promise<string[]> => {
  const open = snap.runs.filter((r) => !TERMINAL.has(r.status)).map((r) => r.id);
  if (open.length === 0) return [];
  const jobs = await query<Record<string, unknown>>(
    server.dataDir,
    `select run_id, id, status, attempt, agent_id, lease_expires_at, now() as now from jobs where run_id = any($1) order by run_id, created_at`,
    [open],
  );
  return [...jobs.map((j) => `unfinished: ${JSON.stringify(j)}`), `server output (tail): ${server.output().slice(-3000)}`];
};
