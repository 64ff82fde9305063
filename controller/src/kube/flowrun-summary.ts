// A FlowRun's status as the mirror writes it (contract: runId, status, substate, startedAt,
// finishedAt, summary <= 1 KiB, observedGeneration, conditions[Succeeded]). Pure: the same run gives
// the same status, so the mirror compares before it writes, and the object stays a few hundred
// bytes whatever the run prints (logs, steps and outputs stay in Postgres).
import type { MirroredRun } from "@flowsvc/store";
import { kubeTime, type Condition } from "./reconcile-kinds.js";

export const SUMMARY_MAX_BYTES = 1024;

export interface FlowRunStatus {
  runId: string;
  status: string;
  substate?: string;
  startedAt?: string;
  finishedAt?: string;
  /** From start to finish, e.g. `1m23s` (the Duration column). */
  duration?: string;
  summary?: string;
  observedGeneration?: number;
  conditions?: Condition[];
}

/** At most `max` UTF-8 bytes of `text`, cut on a character boundary, with `…` where it was cut. */
export const clipUtf8 = (text: string, max: number, from: "start" | "end" = "start"): string => {
  if (Buffer.byteLength(text) <= max) return text;
  const chars = [...text];
  const kept: string[] = [];
  let bytes = Buffer.byteLength("…");
  for (const c of from === "start" ? chars : chars.reverse()) {
    const n = Buffer.byteLength(c);
    if (bytes + n > max) break;
    kept.push(c);
    bytes += n;
  }
  return from === "start" ? `${kept.join("")}…` : `…${kept.reverse().join("")}`;
};

/**
 * What a finished run says in one short string: its error, else its output, else the end of what
 * it printed (`tail`, already masked when stored).
 */
export const runSummary = (run: Pick<MirroredRun, "error" | "output">, tail: string): string => {
  if (run.error) return clipUtf8(run.error, SUMMARY_MAX_BYTES);
  if (run.output && Object.keys(run.output).length > 0) return clipUtf8(JSON.stringify(run.output), SUMMARY_MAX_BYTES);
  return clipUtf8(tail.replace(/\s+$/, ""), SUMMARY_MAX_BYTES, "end");
};

const REASONS: Record<string, { status: Condition["status"]; reason: string }> = {
  queued: { status: "Unknown", reason: "Queued" },
  running: { status: "Unknown", reason: "Running" },
  parked: { status: "Unknown", reason: "Parked" },
  succeeded: { status: "True", reason: "Succeeded" },
  failed: { status: "False", reason: "Failed" },
  cancelled: { status: "False", reason: "Cancelled" },
};

/** `kind:name` of a parked run's activity (the Substate column), or its name alone. */
export const substateText = (s: MirroredRun["substate"]): string | undefined =>
  s ? clipUtf8(s.kind ? `${s.kind}:${s.name}` : s.name, 64) : undefined;

/** The Succeeded condition; its transition time stays while its status does not change. */
export const succeededCondition = (run: MirroredRun, previous: Condition | undefined, now: Date, generation?: number): Condition => {
  const r = REASONS[run.status] ?? { status: "Unknown" as const, reason: "Unknown" };
  const message = run.status === "parked" && run.substate ? `waiting on ${substateText(run.substate)}` : `the run is ${run.status}`;
  return {
    type: "Succeeded",
    status: r.status,
    reason: r.reason,
    message,
    lastTransitionTime: previous && previous.status === r.status ? previous.lastTransitionTime : kubeTime(now),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
};

/** `1h2m3s`, `4m5s`, `6s` (kubectl's style); under a second is `0s`. */
export const durationText = (ms: number): string => {
  const s = Math.max(0, Math.floor(ms / 1000));
  const [h, m, sec] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return h ? `${h}h${m}m${sec}s` : m ? `${m}m${sec}s` : `${sec}s`;
};

/** The whole status of the FlowRun mirroring `run` (summary only once it has ended). */
export const flowRunStatus = (
  run: MirroredRun,
  ctx: { previous?: FlowRunStatus; summary?: string; generation?: number; now: Date },
): FlowRunStatus => {
  const prevCond = ctx.previous?.conditions?.find((c) => c.type === "Succeeded");
  const sub = substateText(run.substate);
  return {
    runId: run.id,
    status: run.status,
    ...(sub ? { substate: sub } : {}),
    ...(run.started_at ? { startedAt: kubeTime(run.started_at) } : {}),
    ...(run.finished_at ? { finishedAt: kubeTime(run.finished_at) } : {}),
    ...(run.started_at && run.finished_at ? { duration: durationText(run.finished_at.getTime() - run.started_at.getTime()) } : {}),
    ...(ctx.summary !== undefined ? { summary: ctx.summary } : {}),
    ...(ctx.generation !== undefined ? { observedGeneration: ctx.generation } : {}),
    conditions: [succeededCondition(run, prevCond, ctx.now, ctx.generation)],
  };
};

/** JSON with object keys sorted: the API server may answer fields in another order than we sent them. */
export const canonicalJson = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0)))
      : x,
  );

/** The keys of a FlowRun's status that a run may lose (a parked run's substate once it goes on). */
const CLEARABLE = ["substate", "startedAt", "finishedAt", "duration", "summary"] as const;

/**
 * The status to send as a merge patch: `desired`, with null for each key `previous` has and
 * `desired` does not (a merge patch keeps a key it leaves out: a finished run kept `sleep:timer`).
 */
export const statusPatch = (previous: FlowRunStatus | undefined, desired: FlowRunStatus): Record<string, unknown> => {
  const cleared = CLEARABLE.filter((k) => previous?.[k] !== undefined && desired[k] === undefined);
  return { ...Object.fromEntries(cleared.map((k) => [k, null])), ...desired };
};

/** Whether two statuses say the same (transition times aside). */
export const sameStatus = (a: FlowRunStatus | undefined, b: FlowRunStatus): boolean => {
  if (!a) return false;
  const strip = (s: FlowRunStatus) => ({ ...s, conditions: s.conditions?.map(({ lastTransitionTime: _t, ...c }) => c) });
  return canonicalJson(strip(a)) === canonicalJson(strip(b));
};
