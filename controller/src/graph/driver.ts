/**
 * The graph driver (docs/internals.md, "Graph runs"): advances a graph run whenever something
 * changed (the run was created, a node finished, a wait was woken, a retry's backoff or a wait's
 * deadline came). Postgres drives it: NOTIFY flowsvc_graphs (the run id) nudges it, and a poll of
 * graph_nodes (due retries, attempts orphaned by a dead process) covers missed nudges and restarts.
 *
 * Each advance runs in one transaction holding the run row's lock (`SELECT ... FOR UPDATE`), so
 * two ticks or two controllers never start a node twice; a node's state commits before any node
 * depending on it starts, so a server killed mid-graph never runs a finished node again. An inline
 * attempt (http, switch, emit, connectors...) in flight when its process died runs again: at least
 * once. Code and shell nodes are agent jobs of the run; parked nodes are journal waits of the run,
 * woken by the existing signal, bus and timer paths.
 */
import { randomUUID } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import type { Dispatcher } from "undici";
import {
  FlowError,
  blockedNodes,
  evaluateConfig,
  evaluateIf,
  graphOutcome,
  isGraphEngineWorkflow,
  isTerminalStatus,
  parseGraph,
  readyNodes,
  type CallRequest,
  type GraphDocument,
  type GraphNode,
  type GraphScope,
  type NodeStatus,
  TERMINAL_STATUSES_SQL,
} from "@flowsvc/core";
import {
  GRAPH_CHANNEL,
  awaitsRunGroup,
  cancelGraphNodes,
  completeRun,
  emitLifecycle,
  graphNodeOfChild,
  expireNodeJobs,
  graphRunsNeedingWork,
  liveGraphRuns,
  lockGraphNodes,
  lockGraphRun,
  markRunRunning,
  notifyGraph,
  openGraphNodeOutputs,
  performCall,
  queueNodeJob,
  settleGraphNode,
  startRunIfNeeded,
  updateGraphNode,
  withTransaction,
  type GraphNodeRow,
  type GraphRunRow,
  type Keyring,
  type Listener,
  type NodeResultKeeper,
} from "@flowsvc/store";
import type { ControllerLogger } from "../dispatcher.js";
import { createNodeResultKeepers, nodeContext } from "./context.js";
import { executorFor, type AgentJobSpec, type NodeOutcome } from "./nodes/index.js";
import { agentJobOf } from "./nodes/code.js";
import { approvalWakeOutcome } from "./nodes/approval.js";
import { releaseEndedJobs, resumeGrantedJobs, takeJobGroup } from "./job-groups.js";

export interface GraphDriverOptions {
  pool: Pool;
  keyring: Keyring;
  listener: Listener;
  logger: ControllerLogger;
  publicUrl: string | undefined;
  /**
   * The dispatcher for requests to URLs a graph's author chose: the deployable's egress policy
   * (controller/src/net/egress-agent.ts, createEgressAgent), closed by its owner.
   */
  egress: Dispatcher;
  /** The poll for due retries and orphaned attempts (default 250 ms). */
  pollMs?: number;
}

/** An attempt the advance decided to start, run after its transaction commits. */
interface Start {
  runId: string;
  run: GraphRunRow;
  node: GraphNode;
  attempt: number;
  config: unknown;
  scope: GraphScope;
}

const POLL_MS = 250;
const ACTIVE: ReadonlySet<string> = new Set(["running", "parked"]);

/** What expressions see of the rows (their outputs opened: see GraphDriver.#scopeOf). */
const scopeOf = (run: GraphRunRow, rows: readonly Pick<GraphNodeRow, "node_id" | "status" | "output">[]): GraphScope => ({
  input: run.input ?? {},
  nodes: Object.fromEntries(rows.map((r) => [r.node_id, { status: r.status, output: r.output ?? null }])),
});

const statusesOf = (rows: readonly GraphNodeRow[]): Record<string, NodeStatus> =>
  Object.fromEntries(rows.map((r) => [r.node_id, r.status]));

/** The run's output: each node's output that nothing depends on (the graph's results), by id. */
const runOutput = (graph: GraphDocument, rows: readonly GraphNodeRow[]): Record<string, unknown> => {
  const hasDependents = new Set(graph.edges.map((e) => e.from));
  const nodes: Record<string, unknown> = {};
  for (const r of rows) if (!hasDependents.has(r.node_id) && r.status === "success") nodes[r.node_id] = r.output ?? null;
  return { nodes };
};

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** A parked node whose wait is done: its journal entry's kind and result, and the sender of the signal that woke it. */
interface WokenWait {
  node_id: string;
  type: string;
  attempt: number;
  kind: string;
  result: unknown;
  sent_by: string | null;
}

/** What a resolved wait settles its node with. */
const wokenSettlement = (w: WokenWait): { ok: true; output: unknown } | { ok: false; error: string; output: unknown } => {
  const answer = (w.result ?? {}) as { timed_out?: boolean; payload?: unknown; envelope?: unknown };
  const timedOut = answer.timed_out === true;
  const bySignal = !timedOut && w.kind === "wait-signal";
  // A signal's payload; an event's whole envelope (`nodes.<id>.output.payload` is the event's payload).
  const output = timedOut ? { timed_out: true } : bySignal ? (answer.payload ?? null) : (answer.envelope ?? answer);
  if (w.type !== "approval") return { ok: true, output };
  // An approval answered `reject` fails its gate (D's approvalWakeOutcome); every other wake succeeds with its payload.
  // Its approver is the signal's sender (the approvals route or `flow signal`), never what the payload claims.
  const woken = approvalWakeOutcome(output, bySignal ? (w.sent_by ?? undefined) : undefined);
  if (woken.kind === "failed") return { ok: false, error: woken.error, output: woken.output };
  return { ok: true, output: woken.kind === "succeeded" ? woken.output : output };
};

export class GraphDriver {
  /** This process's mark on the inline attempts it runs (an attempt marked otherwise is an orphan after a restart). */
  readonly owner = `drv-${randomUUID()}`;
  readonly #o: GraphDriverOptions;
  readonly #graphs = new Map<string, GraphDocument>();
  /** In-process attempts by run, then node: aborted when the run ends. */
  readonly #inflight = new Map<string, Map<string, AbortController>>();
  readonly #busy = new Set<string>();
  readonly #again = new Set<string>();
  readonly #pending = new Set<Promise<void>>();
  /** Outcomes of in-process attempts, recorded by the run's next advance in its transaction (many at once after a fan-out). */
  readonly #outcomes = new Map<string, Array<{ s: Start; outcome: NodeOutcome }>>();
  /** Each project's org, for the node context (a project never changes org). */
  readonly #orgs = new Map<string, string>();
  /** How node results and a run's end are stored: masked with the project's values (cached by the project's stamp). */
  readonly #keepers: ReturnType<typeof createNodeResultKeepers>;
  /** The keeper of each advance in flight, looked up once per advance (by run: a run's advances never overlap). */
  readonly #keeping = new Map<string, Promise<NodeResultKeeper>>();
  /** The expression scope of each read of a run's rows, their sealed outputs opened once. */
  readonly #scopes = new WeakMap<readonly GraphNodeRow[], Promise<GraphScope>>();
  #off: Array<() => void> = [];
  #timer: NodeJS.Timeout | undefined;
  #polling = false;
  #stopped = false;

  constructor(options: GraphDriverOptions) {
    this.#o = options;
    this.#keepers = createNodeResultKeepers(options);
  }

  /** The run's keeper for this advance (store's NodeResultKeeper): what every node result is stored through. */
  #keeper(tx: PoolClient, run: GraphRunRow): Promise<NodeResultKeeper> {
    let keeper = this.#keeping.get(run.id);
    if (!keeper) {
      keeper = this.#keepers(run, tx);
      this.#keeping.set(run.id, keeper);
    }
    return keeper;
  }

  /** A text the engine stores as a node's error (an expression's failure may quote a value), masked. */
  async #masked(tx: PoolClient, run: GraphRunRow, text: string): Promise<string> {
    return (await this.#keeper(tx, run)).masker.text(text);
  }

  /**
   * What the expressions of a run's nodes see: each node's exact output. A node whose output held a
   * secret or credential stores it masked and keeps the exact one sealed (store's NodeResultKeeper):
   * opened here, once per read of the rows. Rows with nothing sealed (older ones too) read as stored.
   */
  #scopeOf(tx: PoolClient, run: GraphRunRow, rows: readonly GraphNodeRow[]): Promise<GraphScope | string> {
    let scope = this.#scopes.get(rows);
    if (!scope) {
      scope = rows.some((r) => r.output_sealed !== null)
        ? this.#keeper(tx, run).then(async (k) => scopeOf(run, await openGraphNodeOutputs(k.keyring, k.scope, run.id, rows)))
        : Promise.resolve(scopeOf(run, rows));
      this.#scopes.set(rows, scope);
    }
    // A sealed output that does not open (moved from another node or run, altered, another master key)
    // fails the node that reads it, closed and named, rather than advancing the run over and over.
    return scope.catch((err: unknown) => {
      if (err instanceof FlowError) return `a node's output could not be read: ${err.message}`;
      throw err;
    });
  }

  start(): void {
    this.#off.push(this.#o.listener.on(GRAPH_CHANNEL, (runId) => this.schedule(runId)));
    this.#off.push(this.#o.listener.on("flowsvc_runs", (runId) => void this.#runEnded(runId)));
    this.#off.push(this.#o.listener.onReconnect(() => void this.#sweep()));
    this.#timer = setInterval(() => void this.#poll(), this.#o.pollMs ?? POLL_MS);
    void this.#sweep();
  }

  /** Advances every live graph run once: at start (a run whose node finished just before a restart moves on) and after a reconnect. */
  async #sweep(): Promise<void> {
    try {
      for (const runId of await liveGraphRuns(this.#o.pool)) this.schedule(runId);
    } catch (err) {
      this.#o.logger.error({ err }, "graph sweep failed; the poll carries on");
    }
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#off.forEach((off) => off());
    for (const nodes of this.#inflight.values()) for (const ac of nodes.values()) ac.abort();
  }

  /** Waits for the advances and attempts in flight (at shutdown, after stop). */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  /** Coalesces nudges per run: one advance at a time, one more if nudged meanwhile. */
  schedule(runId: string): void {
    if (this.#stopped || runId === "") return;
    if (this.#busy.has(runId)) {
      this.#again.add(runId);
      return;
    }
    this.#busy.add(runId);
    this.#track(
      this.#advance(runId).finally(() => {
        this.#busy.delete(runId);
        if (this.#again.delete(runId)) this.schedule(runId);
      }),
    );
  }

  #track(p: Promise<void>): void {
    this.#pending.add(p);
    void p.finally(() => this.#pending.delete(p));
  }

  async #poll(): Promise<void> {
    if (this.#polling || this.#stopped) return;
    this.#polling = true;
    try {
      for (const runId of await graphRunsNeedingWork(this.#o.pool, this.owner)) this.schedule(runId);
    } catch (err) {
      this.#o.logger.error({ err }, "graph poll failed; retrying on the next tick");
    } finally {
      this.#polling = false;
    }
  }

  /** A run ended: a graph run's attempts in flight are aborted; a workflow node's child run ends its node. */
  async #runEnded(runId: string): Promise<void> {
    if (this.#inflight.has(runId)) this.schedule(runId);
    try {
      const parent = await graphNodeOfChild(this.#o.pool, runId);
      if (parent) this.schedule(parent);
    } catch (err) {
      this.#o.logger.error({ err, runId }, "could not look up the graph node of a finished child run");
    }
  }

  async #advance(runId: string): Promise<void> {
    let starts: Start[] = [];
    const outcomes = this.#outcomes.get(runId) ?? [];
    this.#outcomes.delete(runId);
    try {
      starts = await withTransaction(this.#o.pool, (tx) => this.#plan(tx, runId, outcomes));
    } catch (err) {
      this.#keeping.delete(runId);
      // Not recorded: the outcomes wait for the next advance, tried again shortly (a deadlock between two
      // runs' advances over one concurrency group, say, is rolled back on one side and must not stall it).
      if (outcomes.length > 0) this.#outcomes.set(runId, [...outcomes, ...(this.#outcomes.get(runId) ?? [])]);
      this.#o.logger.error({ err, runId }, "graph advance failed; retrying");
      if (!this.#stopped) setTimeout(() => this.schedule(runId), this.#o.pollMs ?? POLL_MS).unref();
      return;
    }
    this.#keeping.delete(runId);
    for (const s of starts) this.#track(this.#runAttempt(s));
  }

  #graphOf(run: GraphRunRow): GraphDocument | string {
    const cached = this.#graphs.get(run.id);
    if (cached) return cached;
    let doc: unknown;
    try {
      doc = JSON.parse(run.graph);
    } catch (err) {
      return `the graph's source is not JSON: ${message(err)}`;
    }
    const parsed = parseGraph(doc);
    if (!parsed.ok) return parsed.problems.map((p) => `${p.path}: ${p.message}`).join("; ");
    if (this.#graphs.size > 1000) this.#graphs.clear();
    this.#graphs.set(run.id, parsed.graph);
    return parsed.graph;
  }

  #abortRun(runId: string): void {
    const nodes = this.#inflight.get(runId);
    if (!nodes) return;
    for (const ac of nodes.values()) ac.abort();
    this.#inflight.delete(runId);
    this.#graphs.delete(runId);
  }

  /** One advance, under the run row's lock: what ended, what is skipped, what starts, and whether the run ends. */
  async #plan(tx: PoolClient, runId: string, outcomes: ReadonlyArray<{ s: Start; outcome: NodeOutcome }>): Promise<Start[]> {
    const run = await lockGraphRun(tx, runId);
    if (!run || !isGraphEngineWorkflow(run.workflow)) return [];
    if (isTerminalStatus(run.status)) {
      this.#abortRun(runId);
      return [];
    }
    // A pipeline queued behind its concurrency group starts nothing until the group's lease is granted.
    if (run.status === "queued" && (await awaitsRunGroup(tx, runId))) return [];
    const graph = this.#graphOf(run);
    if (typeof graph === "string") {
      await cancelGraphNodes(tx, runId);
      await completeRun(tx, runId, { status: "failed", error: graph }, this.#o.publicUrl);
      return [];
    }
    if (run.status === "queued") await startRunIfNeeded(tx, runId, this.#o.publicUrl);
    for (const o of outcomes) await this.#record(tx, run, o);
    await this.#collect(tx, run);
    let rows = await lockGraphNodes(tx, runId);
    if (await resumeGrantedJobs(tx, run, rows)) rows = await lockGraphNodes(tx, runId);
    const starts = [...(await this.#orphans(tx, run, graph, rows)), ...(await this.#startReady(tx, { run, graph, rows }))];
    rows = await lockGraphNodes(tx, runId);
    await releaseEndedJobs(tx, run, rows);
    await this.#conclude(tx, { run, graph, rows });
    return starts;
  }

  /** Cancels the nodes a failure blocks, then skips or starts every ready node, until nothing more changes. */
  async #startReady(tx: PoolClient, p: { run: GraphRunRow; graph: GraphDocument; rows: GraphNodeRow[] }): Promise<Start[]> {
    const { run, graph } = p;
    let rows = p.rows;
    const starts: Start[] = [];
    for (let changed = true; changed;) {
      changed = false;
      const statuses = statusesOf(rows);
      for (const id of blockedNodes(graph, statuses)) {
        await updateGraphNode(tx, run.id, id, { status: "cancelled", finished_at: "now", error: "a node it depends on failed" });
        changed = true;
      }
      for (const id of readyNodes(graph, statuses)) {
        const row = rows.find((r) => r.node_id === id);
        if (!row || starts.some((x) => x.node.id === id) || (row.not_before && row.not_before.getTime() > Date.now())) continue;
        const start = await this.#begin(tx, { run, node: graph.nodes.find((n) => n.id === id)!, row, rows });
        if (start) starts.push(start);
        else changed = true;
      }
      if (changed) rows = await lockGraphNodes(tx, run.id);
    }
    // Every attempt that starts, in one statement (a fan-out of a hundred is one round trip).
    if (starts.length > 0)
      await tx.query(
        `update graph_nodes set status = 'running', attempt = attempt + 1, mode = 'inline', owner = $3, not_before = null,
                started_at = now(), finished_at = null
          where run_id = $1 and node_id = any($2::text[])`,
        [run.id, starts.map((x) => x.node.id), this.owner],
      );
    return this.#queueJobs(tx, starts);
  }

  /** Code and shell attempts become agent jobs here, in the transaction that starts them; the others run in this process. */
  async #queueJobs(tx: PoolClient, starts: Start[]): Promise<Start[]> {
    const inline: Start[] = [];
    for (const s of starts) {
      let job: AgentJobSpec | undefined;
      try {
        job = agentJobOf(s.node.type, s.node.id, s.config);
      } catch (err) {
        await settleGraphNode(tx, {
          runId: s.runId,
          nodeId: s.node.id,
          attempt: s.attempt,
          result: { ok: false, error: message(err) },
          storage: await this.#keeper(tx, s.run),
          quiet: true,
        });
        continue;
      }
      if (!job) inline.push(s);
      else {
        await queueNodeJob(tx, { runId: s.runId, nodeId: s.node.id, capabilities: job.capabilities, job });
        await updateGraphNode(tx, s.runId, s.node.id, { owner: null });
      }
    }
    return inline;
  }

  /** A ready node: skipped by its `if`, failed by an expression that does not evaluate, or to start (the caller records its attempt). */
  async #begin(
    tx: PoolClient,
    a: { run: GraphRunRow; node: GraphNode; row: GraphNodeRow; rows: GraphNodeRow[] },
  ): Promise<Start | undefined> {
    const { run, node, row } = a;
    // An expression's failure may quote a value it read: stored masked, as every node error is.
    const fail = async (error: string): Promise<void> =>
      updateGraphNode(tx, run.id, node.id, {
        status: "failed",
        error: await this.#masked(tx, run, error),
        attempt: row.attempt + 1,
        started_at: "now",
        finished_at: "now",
      });
    const scope = await this.#scopeOf(tx, run, a.rows);
    if (typeof scope === "string") return void (await fail(scope));
    if (node.if !== undefined) {
      const cond = evaluateIf(node.if, scope);
      if (!cond.ok) return void (await fail(`if: ${cond.error}`));
      if (!cond.value) return void (await updateGraphNode(tx, run.id, node.id, { status: "skipped", finished_at: "now" }));
    }
    // A pipeline job with a concurrency group takes its lease first (job-groups.ts): queued behind it, the node parks.
    const group = await takeJobGroup(tx, { run, nodeId: node.id, scope, publicUrl: this.#o.publicUrl });
    if (group.kind === "error") return void (await fail(group.error));
    if (group.kind === "wait") return undefined;
    const config = evaluateConfig(node.config, scope);
    if (!config.ok) return void (await fail(config.error));
    // Recorded as running by the caller, with every other attempt of this advance.
    return { runId: run.id, run, node, attempt: row.attempt + 1, config: config.value, scope };
  }

  /** Inline attempts whose process died (another owner, after a restart) start again, as the same attempt. */
  async #orphans(tx: PoolClient, run: GraphRunRow, graph: GraphDocument, rows: GraphNodeRow[]): Promise<Start[]> {
    const starts: Start[] = [];
    for (const row of rows) {
      if (row.status !== "running" || row.mode !== "inline" || row.owner === this.owner) continue;
      const node = graph.nodes.find((n) => n.id === row.node_id);
      if (!node) continue;
      const scope = await this.#scopeOf(tx, run, rows);
      const config = typeof scope === "string" ? { ok: false as const, error: scope } : { ...evaluateConfig(node.config, scope), scope };
      if (!config.ok) {
        await updateGraphNode(tx, run.id, node.id, {
          status: "failed",
          error: await this.#masked(tx, run, config.error),
          finished_at: "now",
        });
        continue;
      }
      await updateGraphNode(tx, run.id, node.id, { owner: this.owner });
      this.#o.logger.info(
        { runId: run.id, node: node.id, attempt: row.attempt },
        "graph node attempt orphaned by a restart: running it again",
      );
      starts.push({ runId: run.id, run, node, attempt: row.attempt, config: config.value, scope: config.scope });
    }
    return starts;
  }

  /** A parked node whose wait resolved: its answer (a timeout appends run.wait_expired on a root run). */
  async #woken(tx: PoolClient, run: GraphRunRow, w: WokenWait): Promise<void> {
    const result = (w.result ?? {}) as { timed_out?: boolean };
    if (result.timed_out === true && run.parent_run_id === null)
      await emitLifecycle(tx, { runId: run.id, type: "run.wait_expired", extra: { node: w.node_id }, publicUrl: this.#o.publicUrl });
    await settleGraphNode(tx, {
      runId: run.id,
      nodeId: w.node_id,
      attempt: w.attempt,
      result: wokenSettlement(w),
      storage: await this.#keeper(tx, run),
      quiet: true,
    });
  }

  /** Parked nodes whose wait resolved, code/shell jobs past their timeout, and workflow nodes whose child run ended, settle. */
  async #collect(tx: PoolClient, run: GraphRunRow): Promise<void> {
    const { rows } = await tx.query<WokenWait>(
      // The sender of the signal that woke a wait: the approver of an approval gate.
      `select n.node_id, n.type, n.attempt, j.kind, j.result,
              (select s.sent_by from signals s where s.run_id = n.run_id and s.claimed_position = n.wait_position order by s.id limit 1) as sent_by
         from graph_nodes n join journal j on j.run_id = n.run_id and j.position = n.wait_position
        where n.run_id = $1 and n.status = 'parked' and j.status = 'done'`,
      [run.id],
    );
    for (const w of rows) await this.#woken(tx, run, w);
    await expireNodeJobs(tx, run.id);
    const { rows: children } = await tx.query<{ node_id: string; attempt: number; status: string; output: unknown; error: string | null }>(
      // Each child run by primary key (a lateral subquery fenced by `offset 0`): as a join, the generic
      // plan made while runs is small hashed a scan of every run (generic-plans.test.ts's rule).
      `select n.node_id, n.attempt, c.status, c.output, c.error from graph_nodes n
         cross join lateral (select c.status, c.output, c.error from runs c where c.id = n.child_run_id offset 0) c
        where n.run_id = $1 and n.status = 'running' and n.mode = 'child' and c.status in (${TERMINAL_STATUSES_SQL})`,
      [run.id],
    );
    for (const c of children) {
      const result =
        c.status === "succeeded"
          ? { ok: true as const, output: c.output }
          : { ok: false as const, error: `the child run ${c.status}${c.error ? `: ${c.error}` : ""}`, output: c.output };
      await settleGraphNode(tx, {
        runId: run.id,
        nodeId: c.node_id,
        attempt: c.attempt,
        result,
        storage: await this.#keeper(tx, run),
        quiet: true,
      });
    }
  }

  /** The run ends when the plan says so; otherwise it is parked while only parked nodes are left, else running. */
  async #conclude(tx: PoolClient, c: { run: GraphRunRow; graph: GraphDocument; rows: GraphNodeRow[] }): Promise<void> {
    const { run, graph, rows } = c;
    const outcome = graphOutcome(graph, statusesOf(rows));
    if (outcome === "succeeded" || outcome === "failed") return this.#finish(tx, { ...c, outcome });
    const parked = rows.filter((r) => r.status === "parked");
    const busy = rows.some((r) => r.status === "running" || (r.status === "pending" && r.not_before !== null));
    if (!busy && parked.length > 0 && parked.length === rows.filter((r) => ACTIVE.has(r.status)).length) {
      const substate = parked[0]!.substate;
      await tx.query(`update runs set status = 'parked', substate = $2 where id = $1 and status in ('running', 'queued')`, [
        run.id,
        substate ? JSON.stringify({ name: substate.name, kind: substate.kind }) : null,
      ]);
      await tx.query(`select pg_notify('flowsvc_runs', $1)`, [run.id]);
    } else if (run.status === "parked") {
      await markRunRunning(tx, run.id);
    }
  }

  /**
   * The run's end: its output (the leaf nodes') and error masked with the project's secrets and
   * credentials before they are stored, as a script's are (the run.* event carries them to the bus).
   */
  async #finish(tx: PoolClient, c: { run: GraphRunRow; graph: GraphDocument; rows: GraphNodeRow[]; outcome: "succeeded" | "failed" }) {
    const { run, graph, rows } = c;
    // The rows' outputs are stored masked already; masking again also covers a value set since.
    const { masker } = await this.#keeper(tx, run);
    const output = masker.json(runOutput(graph, rows)) as Record<string, unknown>;
    if (c.outcome === "succeeded") {
      await completeRun(tx, run.id, { status: "succeeded", output }, this.#o.publicUrl);
    } else {
      const failed = rows.find((r) => r.status === "failed");
      const error = failed ? `node ${failed.node_id} failed: ${failed.error ?? "no error text"}` : "the graph cannot finish";
      await cancelGraphNodes(tx, run.id);
      await completeRun(tx, run.id, { status: "failed", error: masker.text(error), output }, this.#o.publicUrl);
    }
    this.#graphs.delete(run.id);
  }

  /** Runs one attempt in this process and records its outcome (after its advance committed). */
  async #runAttempt(s: Start): Promise<void> {
    const ac = new AbortController();
    const nodes = this.#inflight.get(s.runId) ?? new Map<string, AbortController>();
    nodes.set(s.node.id, ac);
    this.#inflight.set(s.runId, nodes);
    let outcome: NodeOutcome;
    try {
      const executor = executorFor(s.node.type);
      if (!executor) outcome = { kind: "failed", error: `no executor runs nodes of type ${JSON.stringify(s.node.type)} in this version` };
      else {
        const ctx = await nodeContext({
          ...this.#o,
          run: s.run,
          node: s.node,
          config: s.config,
          scope: s.scope,
          attempt: s.attempt,
          signal: ac.signal,
          orgs: this.#orgs,
        });
        outcome = await executor.start(ctx);
      }
    } catch (err) {
      outcome = { kind: "failed", error: message(err) };
    } finally {
      nodes.delete(s.node.id);
      if (nodes.size === 0 && this.#inflight.get(s.runId) === nodes) this.#inflight.delete(s.runId);
    }
    if (ac.signal.aborted || this.#stopped) return;
    const queued = this.#outcomes.get(s.runId) ?? [];
    queued.push({ s, outcome });
    this.#outcomes.set(s.runId, queued);
    this.schedule(s.runId);
  }

  /** An attempt's outcome (the caller holds the run row's lock), written if the attempt is still the node's current one (else it is stale and dropped). */
  async #record(tx: PoolClient, run: GraphRunRow, { s, outcome }: { s: Start; outcome: NodeOutcome }): Promise<void> {
    const { rows } = await tx.query<{ status: string; attempt: number; owner: string | null }>(
      `select status, attempt, owner from graph_nodes where run_id = $1 and node_id = $2 for update`,
      [s.runId, s.node.id],
    );
    const row = rows[0];
    if (row?.status !== "running" || row.attempt !== s.attempt || row.owner !== this.owner) return;
    const key = { runId: s.runId, nodeId: s.node.id, attempt: s.attempt, storage: await this.#keeper(tx, run) };
    switch (outcome.kind) {
      case "succeeded":
        await settleGraphNode(tx, { ...key, result: { ok: true, output: outcome.output }, quiet: true });
        return;
      case "failed":
        await settleGraphNode(tx, {
          ...key,
          result: { ok: false, error: outcome.error, output: outcome.output, ...(outcome.final ? { final: true } : {}) },
          quiet: true,
        });
        return;
      case "park":
        await this.#park(tx, { run, s, outcome });
        return;
      case "child":
        await updateGraphNode(tx, s.runId, s.node.id, { mode: "child", owner: null, child_run_id: outcome.runId });
        await notifyGraph(tx, s.runId);
        return;
      case "job":
        await queueNodeJob(tx, { runId: s.runId, nodeId: s.node.id, capabilities: outcome.job.capabilities, job: outcome.job });
        await updateGraphNode(tx, s.runId, s.node.id, { owner: null });
        return;
    }
  }

  /**
   * A park outcome becomes a journal wait of the run (wait-signal named `signal`, or wait-event),
   * made by the same call path as a script's, so `flow signal`, the bus and the timer loop wake it.
   * An approval's `run.awaiting` is appended once, when the wait is made (root runs only). Its prompt
   * (which may quote an output) is stored masked, in the node's substate and in the event; its fields
   * are the document's definitions, which the approvals route checks answers against, kept as written.
   */
  async #park(tx: PoolClient, p: { run: GraphRunRow; s: Start; outcome: Extract<NodeOutcome, { kind: "park" }> }): Promise<void> {
    const { run, s, outcome } = p;
    const { rows } = await tx.query<{ next: number }>(`select coalesce(max(position) + 1, 0)::int as next from journal where run_id = $1`, [
      run.id,
    ]);
    const position = rows[0]!.next;
    const timeout = outcome.deadline ? { timeout_ms: Math.max(0, outcome.deadline.getTime() - Date.now()) } : {};
    const req: CallRequest = outcome.eventWait
      ? {
          position,
          kind: "wait-event",
          name: outcome.eventWait.type,
          ordinal: 0,
          args: { ...timeout, ...(outcome.eventWait.when ? { when: outcome.eventWait.when } : {}), node: s.node.id },
        }
      : { position, kind: "wait-signal", name: outcome.signal, ordinal: 0, args: timeout };
    const kind = outcome.awaiting ? "approval" : outcome.eventWait ? "event" : "signal";
    const awaiting = outcome.awaiting && { ...outcome.awaiting, prompt: await this.#masked(tx, run, outcome.awaiting.prompt) };
    const substate = { name: s.node.id, kind, ...(awaiting ? { prompt: awaiting.prompt, fields: awaiting.fields } : {}) };
    await updateGraphNode(tx, run.id, s.node.id, { status: "parked", mode: "wait", owner: null, wait_position: position, substate });
    const answer = await performCall(tx, run.id, req);
    if (awaiting && run.parent_run_id === null)
      await emitLifecycle(tx, {
        runId: run.id,
        type: "run.awaiting",
        extra: { node: s.node.id, gate: s.node.id, prompt: awaiting.prompt, fields: awaiting.fields },
        publicUrl: this.#o.publicUrl,
      });
    // A signal already queued answers at once: the next advance collects it.
    if (answer.status === "done") await notifyGraph(tx, run.id);
  }
}
