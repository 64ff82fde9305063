/**
 * The wait rules (spec, Script semantics; docs/internals.md, "Waits and locks"), as pure
 * decisions: given a wait's recorded state and `now`, what it answers. The store applies them in
 * its transactions (the row locks, SKIP LOCKED and the updates stay in SQL) and the local engine
 * applies them in place; neither decides on its own. No I/O, no clock: `now` is a parameter.
 */
/** The waits that carry a deadline: a sleep's end, a bounded wait's timeout. */
export const TIMED_WAIT_KINDS = ["sleep", "wait-signal", "wait-event"] as const;
export type TimedWaitKind = (typeof TIMED_WAIT_KINDS)[number];

/**
 * - `answered`: what the wait waited for arrived (a signal's payload);
 * - `expired`: its deadline passed: a sleep wakes with `{}`, a bounded wait times out;
 * - `pending`: it keeps waiting (the run parks, or the local engine waits on).
 */
export type WaitAnswer =
  | { readonly state: "answered"; readonly result: unknown }
  | { readonly state: "expired"; readonly result: unknown }
  | { readonly state: "pending" };

export interface WaitState {
  readonly kind: string;
  /** Epoch milliseconds; null for a wait without a timeout. */
  readonly deadlineMs: number | null;
  /** True on the call that created the wait: a sleep always parks once, even for 0 s. */
  readonly fresh?: boolean;
  /** What arrived for it (a signal taken from the run's queue), if anything did. */
  readonly arrived?: { readonly payload: unknown } | undefined;
}

/** The result a wait resolves with once its deadline passed. */
export const expiredResult = (kind: string): unknown => (kind === "sleep" ? {} : { timed_out: true });

/** The expired results by kind, for the store's SQL (`$n::jsonb -> kind`). */
export const EXPIRED_RESULTS: Readonly<Record<TimedWaitKind, unknown>> = Object.fromEntries(
  TIMED_WAIT_KINDS.map((k) => [k, expiredResult(k)]),
) as Record<TimedWaitKind, unknown>;

export const isWaitDue = (deadlineMs: number | null, nowMs: number): boolean => deadlineMs !== null && deadlineMs <= nowMs;

/**
 * How long from its creation a wait may last (ms), from the call's parsed args: a sleep's duration,
 * a bounded wait's timeout; undefined (no deadline) otherwise.
 */
export const waitDurationMs = (
  kind: string,
  args: { readonly duration_ms?: number; readonly timeout_ms?: number | undefined },
): number | undefined => (kind === "sleep" ? args.duration_ms : args.timeout_ms);

/** The deadline of a wait made at `nowMs` (epoch ms), or null for an unbounded one. */
export const waitDeadline = (nowMs: number, durationMs: number | undefined): number | null =>
  durationMs === undefined ? null : nowMs + durationMs;

/** What a wait answers now. */
export const decideWait = (wait: WaitState, nowMs: number): WaitAnswer => {
  if (wait.kind === "wait-signal" && wait.arrived) return { state: "answered", result: { payload: wait.arrived.payload } };
  if (wait.kind === "sleep" && wait.fresh === true) return { state: "pending" };
  return isWaitDue(wait.deadlineMs, nowMs) ? { state: "expired", result: expiredResult(wait.kind) } : { state: "pending" };
};

/** What a resolved wait does to its run: a parked run is queued, a running one is flagged (its suspend requeues). */
export type WakeAction = "queue" | "flag" | "none";

export const wakeAction = (status: string | undefined): WakeAction => {
  if (status === "parked") return "queue";
  return status === "running" ? "flag" : "none";
};

/** The substate `flow status` shows for a parked wait (spec: signal name, awaiting_lease, the timer). */
export const substateOf = (e: {
  readonly kind: string;
  readonly name: string;
  readonly position: number;
}): { name: string; kind: string } => {
  switch (e.kind) {
    case "sleep":
      return { name: "timer", kind: "sleep" };
    case "lock":
      return { name: "awaiting_lease", kind: "lock" };
    case "activity-wait-all":
      return { name: "activities", kind: e.kind };
    case "wait-event":
      return { name: `event:${e.name}#${e.position}`, kind: e.kind };
    case "call":
      return { name: `call#${e.position}`, kind: e.kind };
    default:
      return { name: e.name, kind: e.kind };
  }
};

export interface SuspendState {
  /** A wait resolved while the agent was winding down. */
  readonly wakeRequested: boolean;
  /** How many of its waits were found due at the suspend (and resolved there). */
  readonly resolvedDue: number;
  /** Its waits still pending. */
  readonly pending: ReadonlyArray<{
    readonly kind: string;
    readonly name: string;
    readonly position: number;
    readonly deadlineMs: number | null;
  }>;
}

/**
 * For a run that has not ended (isTerminalStatus: a suspend leaves an ended run as it is):
 * - `requeue`: something already resolved (or nothing is left to wait for): the next pass starts now;
 * - `park`: the run waits, shown by its latest wait, until the earliest deadline (null: none).
 */
export type SuspendDecision =
  | { readonly type: "requeue" }
  | { readonly type: "park"; readonly substate: { name: string; kind: string }; readonly deadlineMs: number | null };

/** What a suspend does with the run (the agent ended its script because a call is waiting). */
export const decideSuspend = (s: SuspendState): SuspendDecision => {
  if (s.wakeRequested || s.resolvedDue > 0 || s.pending.length === 0) return { type: "requeue" };
  const latest = s.pending.reduce((a, b) => (b.position > a.position ? b : a));
  const deadlines = s.pending.flatMap((p) => (p.deadlineMs === null ? [] : [p.deadlineMs]));
  return { type: "park", substate: substateOf(latest), deadlineMs: deadlines.length > 0 ? Math.min(...deadlines) : null };
};
