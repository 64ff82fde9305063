// The FlowRun mirror (issue 16 item 4): every run of a watched namespace's project gets a FlowRun
// whose status follows the run's status, substate and, once it ended, a short summary; finished
// FlowRuns are deleted runTtlSecondsAfterFinished after they finished (Postgres keeps the run). A
// pass lists the runs that finished within the TTL or since the last pass that mirrored everything
// it listed began, whichever is longer: a run whose end no pass could write in time (a slow or
// failing pass, a TTL of 0) still gets it, and then goes at once.
//
// Level-based: a pass reads the runs in flight and the recently finished ones (one query, migration
// 009's indexes), compares each with its FlowRun's status in the informer cache, and writes only a
// difference. Passes run on a NOTIFY of jobs or runs (a nudge), on FlowRun changes, and on a short
// tick (a claim that starts a run sends no NOTIFY). Writes per run with no parks: the create, then
// one status patch per status it is seen in (queued, running, its end): at most 4, fewer when
// a status is passed between two passes; and the delete after the TTL.
import type { Pool } from "pg";
import { isTerminalStatus } from "@flowsvc/core";
import { listMirroredRuns, runOutputTail, type MirroredRun } from "@flowsvc/store";
import type { WatchedObjects } from "./informers.js";
import type { KubeLog } from "./reconcile-log.js";
import type { FlowApi } from "./reconcile-api.js";
import type { NamespaceIndex } from "./reconcile-namespaces.js";
import { FlowRunIndex, FlowRunOwners, type FlowRunObject } from "./flowrun-owners.js";
import {
  SUMMARY_MAX_BYTES,
  canonicalJson,
  flowRunStatus,
  runSummary,
  sameStatus,
  statusPatch,
  type FlowRunStatus,
} from "./flowrun-summary.js";

/** How far Postgres's clock (a run's finished_at) may trail this process's when a pass starts. */
const CLOCK_SLACK_MS = 5000;

export interface MirrorDeps {
  pool: Pool;
  api: FlowApi;
  log: KubeLog;
  flowRuns: WatchedObjects<FlowRunObject>;
  namespaces: NamespaceIndex;
  ttlSeconds: number;
  /** The tick between passes when nothing nudges (default 1000 ms). */
  pollMs?: number;
  now?: () => Date;
}

export class FlowRunMirror {
  readonly owners: FlowRunOwners;
  /** FlowRuns this process created that the informer may not have shown yet. */
  readonly #created = new Map<string, FlowRunObject>();
  /** The status last written per run: the cache may not show our own write at the next pass. */
  readonly #written = new Map<string, string>();
  /** Runs whose FlowRun showed their end: gone from the cache later means deleted (TTL or a person), not to be made again. */
  readonly #ended = new Set<string>();
  readonly #startedAt: Date;
  /**
   * The start of the last pass that mirrored every run it listed: the next pass lists every run
   * that finished since (less CLOCK_SLACK_MS), even when that is longer ago than the TTL, so a run
   * that ended while passes were slow or failing still gets its end, and a TTL of 0 works.
   */
  #coveredFrom: Date;
  readonly #now: () => Date;
  #running: Promise<void> | undefined;
  #again = false;
  #timer: NodeJS.Timeout | undefined;
  #tick: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(private readonly deps: MirrorDeps) {
    this.#now = deps.now ?? (() => new Date());
    this.#startedAt = this.#now();
    this.#coveredFrom = this.#startedAt;
    this.owners = new FlowRunOwners({
      pool: deps.pool,
      api: deps.api,
      namespaces: deps.namespaces,
      index: () => this.#index(),
      created: (o) => void this.#created.set(o.metadata!.name!, o),
    });
  }

  start(): void {
    this.#tick = setInterval(() => this.nudge(), this.deps.pollMs ?? 1000);
    this.#tick.unref();
    this.nudge();
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#tick);
    clearTimeout(this.#timer);
  }

  /** Asks for a pass soon; passes never overlap, and a nudge during one runs another after it. */
  nudge(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.pass()
      .catch((err: unknown) => this.deps.log.warn({ err }, "FlowRun mirror pass failed; the next one retries"))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.nudge();
        }
      });
  }

  /** One pass: create, update and expire FlowRuns. Exposed for tests and benchmarks. */
  async pass(): Promise<void> {
    const now = this.#now();
    const since = new Date(Math.min(now.getTime() - this.deps.ttlSeconds * 1000, this.#coveredFrom.getTime() - CLOCK_SLACK_MS));
    const runs = await listMirroredRuns(this.deps.pool, since);
    let mirroredAll = true;
    for (const run of runs) {
      try {
        await this.#mirror(run, now);
      } catch (err) {
        mirroredAll = false;
        this.deps.log.warn({ err, runId: run.id }, "could not mirror a run to its FlowRun");
      }
    }
    if (mirroredAll) this.#coveredFrom = now;
    const listed = new Set(runs.map((r) => r.id));
    for (const id of this.#ended) if (!listed.has(id)) this.#ended.delete(id);
    await this.#expire(now);
  }

  #index(): FlowRunIndex {
    const index = new FlowRunIndex(this.deps.flowRuns.list());
    for (const [name, o] of this.#created) {
      if (this.deps.flowRuns.get(o.metadata!.namespace!, name)) this.#created.delete(name);
      else index.add(o);
    }
    return index;
  }

  async #mirror(run: MirroredRun, now: Date): Promise<void> {
    const namespace = this.deps.namespaces.namespaceOf(run.org, run.project);
    if (!namespace) return;
    let fr = this.#index().find(run);
    if (!fr) {
      if (this.#ended.has(run.id)) return;
      // A run that ended before this controller started and has no FlowRun had one expire, or was never ours to mirror.
      if (isTerminalStatus(run.status) && run.finished_at! < this.#startedAt) return;
      fr = await this.owners.ensure(run);
    }
    await this.#writeStatus(run, fr, now);
  }

  async #writeStatus(run: MirroredRun, fr: FlowRunObject, now: Date): Promise<void> {
    const previous = fr.status;
    const ended = isTerminalStatus(run.status);
    const desired = flowRunStatus(run, {
      ...(previous ? { previous } : {}),
      ...(ended ? { summary: await this.#summary(run, previous) } : {}),
      ...(fr.metadata?.generation !== undefined ? { generation: fr.metadata.generation } : {}),
      now,
    });
    if (ended) this.#ended.add(run.id);
    if (sameStatus(previous, desired)) return;
    const text = canonicalJson(desired);
    if (this.#written.get(run.id) === text) return;
    await this.deps.api.patchStatus("run", fr.metadata!.namespace!, fr.metadata!.name!, statusPatch(previous, desired));
    this.#written.set(run.id, text);
  }

  /** A finished run's summary: read once (its FlowRun keeps it), from the run's error, output or last printed lines. */
  async #summary(run: MirroredRun, previous: FlowRunStatus | undefined): Promise<string> {
    if (previous?.status === run.status && previous.summary !== undefined) return previous.summary;
    const tail = run.error || run.output ? "" : await runOutputTail(this.deps.pool, run.id, SUMMARY_MAX_BYTES * 4);
    return runSummary(run, tail);
  }

  /** Deletes finished FlowRuns past their TTL; schedules a pass for the next one to expire. */
  async #expire(now: Date): Promise<void> {
    let next = Infinity;
    for (const fr of this.deps.flowRuns.list()) {
      const s = fr.status;
      if (!s?.finishedAt || !isTerminalStatus(s.status)) continue;
      const at = Date.parse(s.finishedAt) + this.deps.ttlSeconds * 1000;
      if (at > now.getTime()) {
        next = Math.min(next, at);
        continue;
      }
      await this.deps.api.delete("run", fr.metadata!.namespace!, fr.metadata!.name!, fr.metadata!.uid);
      if (s.runId) this.#written.delete(s.runId);
      this.deps.log.info({ runId: s.runId, flowRun: fr.metadata!.name }, "finished FlowRun deleted after its TTL");
    }
    clearTimeout(this.#timer);
    if (next !== Infinity && !this.#stopped) {
      this.#timer = setTimeout(() => this.nudge(), Math.max(0, next - now.getTime()) + 50);
      this.#timer.unref();
    }
  }
}
