/**
 * The crash and fault suite (issue 15, item 4): a workload of step-heavy scripts, hook deliveries
 * and handler chains against a real `flow server` on its embedded Postgres, while the server is
 * killed with SIGKILL and restarted on the same data dir, agents are killed with SIGKILL and the
 * server's Postgres connections are terminated. Then everything acknowledged is counted:
 *
 * - runs lost: a submitted run (201) that did not succeed, a hook delivery's (202) handler run
 *   that is missing or did not succeed, or the next link of its chain likewise;
 * - steps run twice: a step body appends one line per real execution to a file (the run, the step,
 *   the agent process, the dispatch's agent id, the idempotency key); more than one line for a
 *   run's step, or a line count that differs from the journal's done entries, is counted. A body
 *   is at-least-once, its recorded result exactly-once: a body whose journal write was never
 *   acknowledged runs again in the next dispatch, with the same FLOW_IDEMPOTENCY_KEY. Two such
 *   cases are inherent and counted apart, by one rule: the journal holds the step once, every
 *   execution has the same key, each ran in a dispatch of its own, and every dispatch but one (the
 *   one that recorded) lost its job before recording, because
 *   - the soak SIGKILLed its agent (`stepsRerunAfterAgentKill`), or
 *   - the server requeued its job when its lease lapsed (`stepsRerunAfterLeaseLoss`: the server's
 *     log has "agent leases expired" naming the run between that dispatch's "job assigned" and the
 *     next one; a host too loaded for an agent to renew its lease within the lease, or an agent
 *     gone). A server kill alone never causes a re-run: the agents outlive it and keep their jobs
 *     (their leases are extended when the server starts again);
 * - 202s without an event: a delivery answered 202 whose event is not in the database;
 * - events delivered twice to a handler: more than one run of a handler for one event.
 *
 * `npm run soak` runs the full version (test/src/soak/main.ts); test/src/soak/soak.test.ts a short one.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { copyFile, readFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { HANDLER_RUNS_IN_FLIGHT_LIMIT, isTerminalStatus } from "@flowsvc/core";
import { startTestServer, type TestServer } from "../support/server.js";
import { scriptDir } from "../support/script-dir.js";
import { alive, waitFor } from "../support/wait.js";
import { childrenOf } from "../support/proc.js";

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
  /** The server's lease (default 15 s, the server's default). */
  leaseMs?: number;
  /** Bound on the workload and its faults (submits retried while the server is down give up then; a fault waits for work in flight until then). */
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
  /** A body ran again because its job was requeued when its lease lapsed before the agent recorded it; same idempotency key. */
  stepsRerunAfterLeaseLoss: number;
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
 * <agent id> <idempotency key>`. The script's shell fills in the run, the agent process and the
 * dispatch's agent id (a step body gets none of them); the body's own shell the key (a script does
 * not see it).
 */
const effect = (effects: string, step: string): string =>
  `flow step ${step} -- sh -c "echo $FLOW_WORKFLOW_ID ${step} $FLOW_AGENT_PID $FLOW_AGENT_ID \\$FLOW_IDEMPOTENCY_KEY >> ${effects}"\n`;

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

/**
 * An agent runs the agent package's dist/main.js: from the checkout (agent-image/), or, when the
 * server runs as root from a checkout its agent user cannot read (CI's `mktemp -d` clone), from the
 * readable copy in the data dir (agent-runtime/<version>/node_modules/@flowsvc/agent/).
 */
const isAgent = (pid: number): boolean => {
  try {
    return /(agent-image|@flowsvc\/agent)\/dist\/main\.js/.test(readFileSync(`/proc/${pid}/cmdline`, "latin1"));
  } catch {
    return false;
  }
};

/** The server's agent processes (its children named agent). */
const agentsOf = (serverPid: number): number[] => childrenOf(serverPid).filter(isAgent);

/** The server's agents that run a script now (the script is the agent's child): where a fault meets work in flight. */
const busyAgentsOf = (serverPid: number): number[] => agentsOf(serverPid).filter((pid) => childrenOf(pid).length > 0);

interface Tally {
  runs: string[];
  /** The agents the soak killed. */
  killedAgents: number[];
  /** The agents of killed servers (they run their job on, then end). */
  orphans: number[];
  deliveries: string[];
  refusedWhileDown: number;
  /** Why requests were not acknowledged, and how often. */
  refusals: Map<string, number>;
  /** The soak ended (counted, or failed): requests still being sent again give up. */
  over: boolean;
  serverKills: number;
  agentKills: number;
  terminated: number;
}

/** Counts a request that was not acknowledged, by why (an error, or a status and body). */
const refused = (tally: Tally, why: string): undefined => {
  tally.refusedWhileDown++;
  tally.refusals.set(why, (tally.refusals.get(why) ?? 0) + 1);
  return undefined;
};

/** Submits with an idempotency key until acknowledged: a submit that fails while the server is down is sent again. */
const submitUntilAcknowledged = async (api: Api, source: string, tally: Tally, deadline: number): Promise<void> => {
  const key = randomUUID();
  while (Date.now() < deadline && !tally.over) {
    const res = await api("POST", `${BASE}/runs`, { kind: "script", source, filename: "soak.sh", idempotency_key: key }).catch(
      (err: Error) => refused(tally, `${err.message}: ${String((err.cause as Error | undefined)?.message)}`),
    );
    if (res && (res.status === 201 || res.status === 200)) {
      tally.runs.push((res.body as { id: string }).id);
      return;
    }
    if (res) refused(tally, `submit ${res.status} ${JSON.stringify(res.body).slice(0, 120)}`);
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
  while (Date.now() < deadline && !tally.over) {
    const res = await api("POST", "/api/v1/hooks/default/default/soak", { id }, { "x-flow-hook-secret": secret, authorization: "" }).catch(
      (err: Error) => refused(tally, `${err.message}: ${String((err.cause as Error | undefined)?.message)}`),
    );
    if (res?.status === 202) {
      tally.deliveries.push(id);
      return;
    }
    if (res) refused(tally, `delivery ${res.status} ${JSON.stringify(res.body).slice(0, 120)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

/**
 * The handler runs the soak's chains hold or will hold, for the project's limit on handler runs in
 * flight: the live ones, plus one for each live h1 run that has not emitted its soak.b yet (its h2).
 */
const chainRunsInFlight = async (dataDir: string): Promise<number> => {
  const live = `status not in ('succeeded', 'failed', 'cancelled')`;
  const rows = await query<{ n: number }>(
    dataDir,
    `select (select count(*) from runs where handler_name is not null and ${live})::int
          + (select count(*) from runs r where r.handler_name = 'h1' and ${live}
                and not exists (select 1 from events e where e.type = 'soak.b' and e.source_run_id = r.id))::int as n`,
  );
  return rows[0]?.n ?? 0;
};

/**
 * Checks `check` until it holds (true) or `deadline` passes (false): the soak's one wait on a
 * condition. Unlike waitFor, running out of time is an answer, not an error: a fault that meets no
 * work in flight by then still happens, and the counts say so.
 */
const until = async (deadline: number, check: () => boolean | Promise<boolean>): Promise<boolean> => {
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
};

/**
 * A delivery sent as a sender that respects the project's limit on handler runs in flight
 * (HANDLER_RUNS_IN_FLIGHT_LIMIT) would: once its chain (h1, then h2) has room, so that h1's emit is
 * not refused for the limit (emit_refused: documented, not a loss). Deliveries go one at a time.
 */
const deliverWithinTheLimit = async (
  ctx: { server: TestServer; api: Api; secret: string },
  tally: Tally,
  deadline: number,
): Promise<void> => {
  const room = async (): Promise<boolean> =>
    (await chainRunsInFlight(ctx.server.dataDir).catch(() => HANDLER_RUNS_IN_FLIGHT_LIMIT)) + 2 <= HANDLER_RUNS_IN_FLIGHT_LIMIT;
  await until(deadline, async () => tally.over || (await room()));
  await deliverUntilAcknowledged(ctx.api, ctx.secret, tally, deadline);
};

/** Wave `i`'s part of `n` (the earlier waves get work first): the workload is sent in waves, one before each fault and one after the last. */
const share = (n: number, i: number, waves: number): number => Math.ceil(((i + 1) * n) / waves) - Math.ceil((i * n) / waves);

/**
 * Waits (until `deadline`, polling every 20 ms) for an agent of the server to run a script, so that
 * the fault meets a script in flight; answers whether one did.
 */
const workInFlight = (server: TestServer, deadline: number): Promise<boolean> =>
  until(deadline, () => {
    assertServerUp(server);
    return busyAgentsOf(server.process.pid!).length > 0;
  });

/** A server the soak did not kill must be running: one that ended on its own is the finding, with its last output. */
const assertServerUp = (server: TestServer): void => {
  const { exitCode, signalCode } = server.process;
  if (exitCode !== null || signalCode !== null)
    throw new Error(
      `flow server ended on its own (exit ${exitCode}, signal ${signalCode}); its last output:\n${server.output().slice(-4000)}`,
    );
};

/** Terminates the server's Postgres connections; while it has none (it just started), waits for one, until `deadline`. */
const terminateBackends = async (dataDir: string, deadline: number): Promise<number> => {
  let n = 0;
  await until(deadline, async () => {
    const rows = await query<{ n: number }>(
      dataDir,
      `select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
        where datname = 'flowsvc' and pid <> pg_backend_pid() and backend_type = 'client backend'`,
    );
    n = rows[0]?.n ?? 0;
    return n > 0;
  });
  return n;
};

/** SIGKILLs an agent of the server that runs a script (an idle one if none does by `deadline`). */
const killAnAgent = async (server: TestServer, tally: Tally, deadline: number): Promise<void> => {
  await workInFlight(server, deadline);
  const serverPid = server.process.pid!;
  const pid = busyAgentsOf(serverPid)[0] ?? agentsOf(serverPid)[0];
  if (pid === undefined) return;
  try {
    process.kill(pid, "SIGKILL");
    tally.agentKills++;
    tally.killedAgents.push(pid);
  } catch {
    // gone already
  }
};

type Fault = "server" | "agent" | "pg";

/** One fault, once the server has work in flight (conditions, not timers). */
const inject = async (fault: Fault, server: TestServer, tally: Tally, deadline: number): Promise<string> => {
  if (fault === "server") {
    const busy = await workInFlight(server, deadline);
    tally.orphans.push(...agentsOf(server.process.pid!));
    await server.kill("SIGKILL");
    tally.serverKills++;
    await server.restart();
    return `server killed ${busy ? "while a script ran" : "(no script ran)"} and restarted (${tally.serverKills})`;
  }
  if (fault === "agent") {
    await killAnAgent(server, tally, deadline);
    return `agent killed (${tally.agentKills})`;
  }
  await workInFlight(server, deadline);
  tally.terminated += await terminateBackends(server.dataDir, deadline);
  return `Postgres backends terminated (${tally.terminated} so far)`;
};

/**
 * The workload and the faults: the work is sent in waves (one before each fault, one after the
 * last; each wave's submits and deliveries are sent again until acknowledged, also across a
 * server kill), and each fault waits for a script in flight. Faults interleave (server, agent, pg,
 * server, ...) so every kind meets the workload.
 */
const drive = async (ctx: { server: TestServer; api: Api; secret: string; effects: string }, opts: SoakOptions, tally: Tally) => {
  const { server, api, secret, effects } = ctx;
  const log = opts.log ?? (() => undefined);
  const deadline = Date.now() + opts.deadlineMs;
  const order = interleave<Fault>([
    ...Array<Fault>(opts.serverKills).fill("server"),
    ...Array<Fault>(opts.agentKills).fill("agent"),
    ...Array<Fault>(opts.terminations).fill("pg"),
  ]);
  const waves = order.length + 1;
  const sent: Array<Promise<void>> = [];
  let deliveries = Promise.resolve();
  const sendWave = (i: number): void => {
    for (let k = 0; k < share(opts.scripts, i, waves); k++)
      sent.push(submitUntilAcknowledged(api, stepScript(effects, opts.steps), tally, deadline));
    for (let k = 0; k < share(opts.deliveries, i, waves); k++)
      deliveries = deliveries.then(() => deliverWithinTheLimit({ server, api, secret }, tally, deadline));
  };
  for (const [i, fault] of order.entries()) {
    sendWave(i);
    log(await inject(fault, server, tally, deadline));
  }
  sendWave(order.length);
  await Promise.all([...sent, deliveries]);
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
  /** A failed run's last stderr and system log lines: why it failed. */
  log_tail: string | null;
}

/** Reads what the database holds of the soak: runs, the hook's events, the handlers' events, step journal entries. */
const snapshot = async (dataDir: string) => {
  const runs = await query<Row>(
    dataDir,
    `select id, status, error, handler_name, event_id,
            case when status = 'failed' then (select right(string_agg(data, '' order by l.id), 400) from run_logs l
                                               where l.run_id = r.id and l.stream <> 'stdout') end as log_tail
       from runs r`,
  );
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

/** Everything acknowledged has come to rest: every submitted run and every chain link is terminal. */
const settled = (snap: Snapshot, tally: Tally): boolean => {
  const byId = new Map(snap.runs.map((r) => [r.id, r]));
  if (!tally.runs.every((id) => isTerminalStatus(byId.get(id)?.status ?? ""))) return false;
  const handlerRuns = snap.runs.filter((r) => r.handler_name !== null);
  if (!handlerRuns.every((r) => isTerminalStatus(r.status))) return false;
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

/** One real execution of a step body: its agent process, its dispatch (agent id) and its idempotency key. */
interface Execution {
  agent: number;
  dispatch: string;
  key: string;
}

/** The real executions of each `<run> <step>`, in the order they ran. */
type Executions = Map<string, Execution[]>;

const executions = async (effects: string): Promise<Executions> => {
  const text = await readFile(effects, "utf8").catch(() => "");
  const n: Executions = new Map();
  for (const line of text.split("\n").filter(Boolean)) {
    const [run = "", step = "", agent = "", dispatch = "", key = ""] = line.split(" ");
    n.set(`${run} ${step}`, [...(n.get(`${run} ${step}`) ?? []), { agent: Number(agent), dispatch, key }]);
  }
  return n;
};

/**
 * The dispatches (agent ids) whose job the server requeued because their lease lapsed, read from
 * the server's log (every start appends to it): "agent leases expired" names runs, and a run's
 * requeued dispatch is the one its last "job assigned" line named. A line a killed server did not
 * write only leaves a dispatch out, so a re-run is then counted as run twice, never excused.
 */
const leaseLapsedDispatches = async (serverLog: string): Promise<Set<string>> => {
  const text = await readFile(serverLog, "utf8").catch(() => "");
  const current = new Map<string, string>();
  const lapsed = new Set<string>();
  for (const line of text.split("\n")) {
    const entry = dispatchLine(line);
    if (entry?.msg === "job assigned" && typeof entry.runId === "string" && typeof entry.agentId === "string")
      current.set(entry.runId, entry.agentId);
    if (entry?.msg !== "agent leases expired; dispatching those jobs again" || !Array.isArray(entry.runs)) continue;
    for (const run of entry.runs) {
      const dispatch = typeof run === "string" ? current.get(run) : undefined;
      if (dispatch) lapsed.add(dispatch);
    }
  }
  return lapsed;
};

/** A server log line about a dispatch ("job assigned") or a lease reaper pass, parsed; undefined for any other line. */
const dispatchLine = (line: string): { msg?: unknown; runId?: unknown; agentId?: unknown; runs?: unknown } | undefined => {
  if (!line.includes("job assigned") && !line.includes("agent leases expired")) return undefined;
  try {
    return JSON.parse(line) as { msg?: unknown; runId?: unknown; agentId?: unknown; runs?: unknown };
  } catch {
    return undefined;
  }
};

/** Why the dispatches of a re-run body lost their jobs (the soak killed their agents, or their leases lapsed). */
interface LostJobs {
  killedAgents: readonly number[];
  lapsed: ReadonlySet<string>;
}

/**
 * A body re-run that is the contract (at-least-once for a body, exactly-once for its recorded
 * result), not a double: the journal has the step once, every execution has the same idempotency
 * key and a dispatch of its own, and every dispatch but one (the one that recorded) lost its job
 * before recording, its agent SIGKILLed by the soak ("agent") or its lease lapsed ("lease").
 * Anything else is a double.
 */
const rerunCause = (runs: readonly Execution[], recorded: number, lost: LostJobs): "agent" | "lease" | undefined => {
  const key = runs[0]?.key ?? "";
  if (recorded !== 1 || runs.length < 2 || key === "" || runs.some((r) => r.key !== key || r.dispatch === "")) return undefined;
  if (new Set(runs.map((r) => r.dispatch)).size !== runs.length) return undefined;
  // All but one: an agent whose lease lapsed may still be running, and run the body after its successor did.
  const killed = runs.filter((r) => lost.killedAgents.includes(r.agent)).length;
  if (killed >= runs.length - 1) return "agent";
  const gone = runs.filter((r) => lost.killedAgents.includes(r.agent) || lost.lapsed.has(r.dispatch)).length;
  return gone >= runs.length - 1 ? "lease" : undefined;
};

interface Counts {
  runsLost: number;
  stepsRunTwice: number;
  stepsRerunAfterAgentKill: number;
  stepsRerunAfterLeaseLoss: number;
  acceptedWithoutEvent: number;
  eventsDeliveredTwice: number;
}

/** Counts one kind of figure, naming each case in `details`. */
const counter = (counts: Counts, details: string[]) => (figure: keyof Counts, detail: string) => {
  counts[figure]++;
  details.push(detail);
};

const runDetail = (r: Row | undefined): string =>
  r
    ? `${r.status}${r.error ? ` (${r.error.slice(0, 300)})` : ""}${r.log_tail ? `, its log ends ${JSON.stringify(r.log_tail)}` : ""}`
    : "missing";

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

/** What the soak read back: the database, the step bodies' effect lines, and why dispatches lost their jobs. */
interface Evidence {
  snap: Snapshot;
  effects: Executions;
  lost: LostJobs;
}

const countFigures = ({ snap, effects, lost }: Evidence, tally: Tally, details: string[]): Counts => {
  const counts: Counts = {
    runsLost: 0,
    stepsRunTwice: 0,
    stepsRerunAfterAgentKill: 0,
    stepsRerunAfterLeaseLoss: 0,
    acceptedWithoutEvent: 0,
    eventsDeliveredTwice: 0,
  };
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
    const cause = rerunCause(runs, recorded, lost);
    if (cause === "agent") count("stepsRerunAfterAgentKill", detail);
    else if (cause === "lease") count("stepsRerunAfterLeaseLoss", detail);
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
  const server = await startTestServer({ embedded: true, agents: 4, leaseMs: opts.leaseMs ?? 15_000 });
  const api = apiOf(server);
  const tally: Tally = {
    runs: [],
    killedAgents: [],
    orphans: [],
    deliveries: [],
    refusedWhileDown: 0,
    refusals: new Map(),
    over: false,
    serverKills: 0,
    agentKills: 0,
    terminated: 0,
  };
  try {
    const secret = await setUp(api, effects);
    await drive({ server, api, secret, effects }, opts, tally);
    log(`workload sent: ${tally.runs.length} runs, ${tally.deliveries.length} deliveries acknowledged; waiting for them to finish`);
    await waitFor(
      "everything acknowledged to finish",
      async () => settled(await snapshot(server.dataDir), tally),
      opts.settleMs,
      250,
    ).catch((err: Error) => log(`${err.message}: counting what there is`));
    const snap = await snapshot(server.dataDir);
    const effectLines = await executions(effects);
    const details = await unfinished(server, snap);
    const lapsed = await leaseLapsedDispatches(join(server.dataDir, "server.log"));
    const figures = countFigures({ snap, effects: effectLines, lost: { killedAgents: tally.killedAgents, lapsed } }, tally, details);
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
      details: [...details, ...[...tally.refusals].map(([why, n]) => `not acknowledged ${n} times: ${why}`)],
    };
  } finally {
    tally.over = true;
    if (opts.keepLogs) {
      for (const f of ["server.log", "postgres.log"])
        await copyFile(join(server.dataDir, f), join(opts.keepLogs, f)).catch(() => undefined);
    }
    await stopAll(server, tally.orphans);
  }
};

/**
 * Stops the server, waits for its agents and for those a server kill left running (they end after
 * their job; any still alive after 30 s is killed), then removes the data dir (the server's stop).
 */
const stopAll = async (server: TestServer, orphans: readonly number[]): Promise<void> => {
  const agents = [...orphans, ...(server.process.pid ? agentsOf(server.process.pid) : [])];
  await server.stop();
  await waitFor("the agents to end", () => agents.every((pid) => !alive(pid)), 30_000).catch(() => {
    for (const pid of agents.filter(alive)) process.kill(pid, "SIGKILL");
  });
};

/** The jobs of runs that did not finish, and the server's last output: where a stuck run is to be chased. */
const unfinished = async (server: TestServer, snap: Snapshot): Promise<string[]> => {
  const open = snap.runs.filter((r) => !isTerminalStatus(r.status)).map((r) => r.id);
  if (open.length === 0) return [];
  const jobs = await query<Record<string, unknown>>(
    server.dataDir,
    `select run_id, id, status, attempt, agent_id, lease_expires_at, now() as now from jobs where run_id = any($1) order by run_id, created_at`,
    [open],
  );
  return [...jobs.map((j) => `unfinished: ${JSON.stringify(j)}`), `server output (tail): ${server.output().slice(-3000)}`];
};
