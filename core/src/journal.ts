/**
 * Replay rules for the journal (ARCHITECTURE.md, "Journal"; spec, "Script semantics" rule 1).
 *
 * A run's durable calls are numbered by position in the order the script makes them. On a replay
 * the call at each position must be the one the journal recorded there (same kind, same name,
 * same per-name ordinal); anything else is a determinism error that names both calls. Pure: no
 * I/O, no clock.
 */
import type { JournalEntry } from "./agent-api.js";
import { STEP_OUTPUT_LIMIT } from "./agent-api.js";
import { FlowError } from "./errors.js";

/** A durable call as the script made it: `ordinal` counts earlier calls of the same kind and name. */
export interface DurableCall {
  readonly kind: string;
  readonly name: string;
  readonly ordinal: number;
}

/**
 * - `new`: nothing finished is recorded at this position; the call runs (a `pending` record of
 *   the same call, left by an agent that died mid-call, runs again under the same position).
 * - `replay`: the call finished on an earlier pass; answer from `entry.result`.
 */
export type JournalMatch = { readonly type: "new" } | { readonly type: "replay"; readonly entry: JournalEntry };

/** Kinds the server may park (answer `pending`): their result can arrive while the run waits. */
const PARKING_KINDS: ReadonlySet<string> = new Set([
  "sleep",
  "wait-signal",
  "wait-event",
  "lock",
  "activity",
  "activity-collect",
  "activity-wait-all",
  "call",
]);

/**
 * The position the previous pass parked on, or -1: the last entry of a claim's journal when its
 * kind can park (a pass ends at the call it parks on). Its result arrived while the run was
 * parked, so the pass that claims it is the first to receive it and writes it to the log; every
 * other recorded result reached an earlier pass and replays without output (docs/internals.md,
 * "Replayed output"). A pass that ended without parking (an agent lost mid-pass) is run again as
 * a whole, its plain output included.
 */
export const parkedPosition = (journal: readonly JournalEntry[]): number => {
  let last: JournalEntry | undefined;
  for (const entry of journal) if (last === undefined || entry.position > last.position) last = entry;
  return last !== undefined && PARKING_KINDS.has(last.kind) ? last.position : -1;
};

/** `step "build"#0`: how a call is named in messages (the same `name#n` form `rerun --from` takes). */
export const describeCall = (call: DurableCall): string => `${call.kind} ${JSON.stringify(call.name)}#${call.ordinal}`;

/** A call as recorded at its position (a journal entry, a record request). */
export interface PositionedCall extends DurableCall {
  readonly position: number;
}

/** The one determinism rule: the call at a position is the recorded one when kind, name and ordinal all match. */
export const isSameCall = (recorded: DurableCall, call: DurableCall): boolean =>
  recorded.kind === call.kind && recorded.name === call.name && recorded.ordinal === call.ordinal;

/**
 * The one determinism refusal, for every layer (the agent's cursor, the server's call and record
 * paths, the local engine): it names the position and both calls.
 */
export const determinismError = (recorded: PositionedCall, call: DurableCall): FlowError =>
  new FlowError(
    "determinism",
    `determinism error at call #${recorded.position}: the journal recorded ${describeCall(recorded)} but the script called ${describeCall(call)}`,
    {
      hint: "a script must make its durable calls with the same names in the same order on every pass; start a new run, or `flow rerun --from` a site the new code still reaches",
      details: {
        position: recorded.position,
        recorded: { kind: recorded.kind, name: recorded.name, ordinal: recorded.ordinal },
        called: { kind: call.kind, name: call.name, ordinal: call.ordinal },
      },
    },
  );

/** Throws the determinism refusal when `call` is not the call recorded at its position. */
export const assertSameCall = (recorded: PositionedCall, call: DurableCall): void => {
  if (!isSameCall(recorded, call)) throw determinismError(recorded, call);
};

/**
 * Decides how the call made at `position` relates to what the journal recorded there.
 * Throws FlowError("determinism") when a different call was recorded at that position.
 */
export const matchJournal = (recorded: JournalEntry | undefined, call: DurableCall, position: number): JournalMatch => {
  if (recorded === undefined) return { type: "new" };
  assertSameCall({ ...recorded, position }, call);
  return recorded.status === "done" ? { type: "replay", entry: recorded } : { type: "new" };
};

/** Indexes a claim's journal by position (a later duplicate of a position wins: it never happens). */
export const indexJournal = (entries: readonly JournalEntry[]): ReadonlyMap<number, JournalEntry> =>
  new Map(entries.map((e) => [e.position, e]));

/** The recorded error of a step whose stdout went over the limit (spec, Errors: "how far over"). */
export const stepOutputTooLargeMessage = (totalBytes: number, limit: number = STEP_OUTPUT_LIMIT): string =>
  `step output is ${totalBytes} bytes, ${totalBytes - limit} bytes over the ${formatLimit(limit)} limit`;

const formatLimit = (bytes: number): string =>
  bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
