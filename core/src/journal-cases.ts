/**
 * The replay table every engine must answer the same way (issue 9: "the local engine and the
 * server give the same answer for the same journal"). Each case is a recorded journal and one
 * request a replaying script makes, with the answer core's rules give: the server's store
 * (recordJournal, performCall) and the local engine's backend (cli/src/local) are both run against
 * it in cli/src/local/journal-cases.test.ts, and `flow run` end to end in local-replay.test.ts.
 *
 * Pure data; exported for tests only.
 */
import type { CallRequest, JournalEntry } from "./agent-api.js";
import { determinismError } from "./journal.js";

/** What a replaying script asks at a position: a call (`/agent/v1/call`) or a step's record (`/agent/v1/journal`). */
export interface JournalCaseRequest {
  readonly via: "call" | "record";
  readonly position: number;
  readonly kind: CallRequest["kind"];
  readonly name: string;
  readonly ordinal: number;
  /** Call args (`via: "call"`), or the result a record carries (`via: "record"`). */
  readonly args?: Record<string, unknown>;
  readonly result?: unknown;
}

/**
 * - `replayed`: the recorded entry answers, unchanged (nothing runs again);
 * - `recorded`: nothing finished was at the position: the call ran (or the record was written);
 * - `refused`: FlowError("determinism") with exactly this message.
 */
export type JournalCaseAnswer =
  | { readonly type: "replayed"; readonly entry: JournalEntry }
  | { readonly type: "recorded"; readonly entry: JournalEntry }
  | { readonly type: "refused"; readonly code: "determinism"; readonly message: string };

export interface JournalCase {
  readonly name: string;
  readonly journal: readonly JournalEntry[];
  readonly request: JournalCaseRequest;
  readonly expect: JournalCaseAnswer;
}

interface At {
  readonly position: number;
  readonly kind: CallRequest["kind"];
  readonly name: string;
  readonly ordinal: number;
}

const at = (position: number, kind: CallRequest["kind"], name: string, ordinal: number): At => ({ position, kind, name, ordinal });

const done = (call: At, result: unknown): JournalEntry => ({ ...call, status: "done", result });

const refused = (recorded: JournalEntry, req: JournalCaseRequest): JournalCaseAnswer => ({
  type: "refused",
  code: "determinism",
  message: determinismError(recorded, req).message,
});

const STEP_RESULT = { exit: 0, stdout_b64: "YnVpbHQK" };
const OTHER_STEP_RESULT = { exit: 3, stdout_b64: "" };
/** A name with quotes, a newline, a percent-encoding and a non-BMP character: shown unambiguously. */
const HOSTILE_NAME = 'deploy "prod"\n%2F../\u{1F680}';

const approved = done(at(0, "wait-signal", "approve", 0), { payload: { by: "ana" } });
const secondApprove = done(at(1, "wait-signal", "approve", 1), { payload: { by: "bo" } });
const built = done(at(0, "step", "build", 0), STEP_RESULT);
const slept = done(at(0, "sleep", "", 0), {});
const hostile = done(at(0, "wait-signal", HOSTILE_NAME, 0), { payload: null });

const callReq = (call: At, args: Record<string, unknown> = {}): JournalCaseRequest => ({ via: "call", ...call, args });
const recordReq = (call: At, result: unknown): JournalCaseRequest => ({ via: "record", ...call, result });

const cases = (): JournalCase[] => {
  const list: JournalCase[] = [];
  /** `expect` is given the request, for the refusals whose message names it. */
  const add = (c: Omit<JournalCase, "expect">, expect: (req: JournalCaseRequest) => JournalCaseAnswer): void => {
    list.push({ ...c, expect: expect(c.request) });
  };
  add(
    {
      name: "a call past the end of the journal runs (unlock answers at once)",
      journal: [approved],
      request: callReq(at(1, "unlock", "db", 0)),
    },
    () => ({
      type: "recorded",
      entry: done(at(1, "unlock", "db", 0), {}),
    }),
  );
  add(
    {
      name: "the recorded call at its position replays its result",
      journal: [approved, secondApprove],
      request: callReq(at(1, "wait-signal", "approve", 1)),
    },
    () => ({
      type: "replayed",
      entry: secondApprove,
    }),
  );
  add(
    {
      name: "a recorded sleep replays at once (it does not sleep again)",
      journal: [slept],
      request: callReq(at(0, "sleep", "", 0), { duration_ms: 3_600_000 }),
    },
    () => ({
      type: "replayed",
      entry: slept,
    }),
  );
  add(
    { name: "a different kind at a recorded position is refused", journal: [slept], request: callReq(at(0, "wait-signal", "", 0)) },
    (r) => refused(slept, r),
  );
  add(
    {
      name: "a different name at a recorded position is refused",
      journal: [approved],
      request: callReq(at(0, "wait-signal", "reject", 0)),
    },
    (r) => refused(approved, r),
  );
  add(
    {
      name: "the same name with a different ordinal is refused",
      journal: [approved, secondApprove],
      request: callReq(at(1, "wait-signal", "approve", 0)),
    },
    (r) => refused(secondApprove, r),
  );
  add(
    {
      name: "a hostile name is named unambiguously in the refusal",
      journal: [hostile],
      request: callReq(at(0, "wait-signal", `${HOSTILE_NAME} `, 0)),
    },
    (r) => refused(hostile, r),
  );
  add({ name: "a hostile name that matches replays", journal: [hostile], request: callReq(at(0, "wait-signal", HOSTILE_NAME, 0)) }, () => ({
    type: "replayed",
    entry: hostile,
  }));
  add(
    { name: "a step recorded past the end is written", journal: [approved], request: recordReq(at(1, "step", "build", 0), STEP_RESULT) },
    () => ({
      type: "recorded",
      entry: done(at(1, "step", "build", 0), STEP_RESULT),
    }),
  );
  add(
    {
      name: "a step recorded again at its position keeps the first write",
      journal: [built],
      request: recordReq(at(0, "step", "build", 0), OTHER_STEP_RESULT),
    },
    () => ({
      type: "replayed",
      entry: built,
    }),
  );
  add(
    {
      name: "a step recorded with another ordinal at a taken position is refused",
      journal: [built],
      request: recordReq(at(0, "step", "build", 1), STEP_RESULT),
    },
    (r) => refused(built, r),
  );
  add(
    { name: "a step recorded where a sleep was is refused", journal: [slept], request: recordReq(at(0, "step", "", 0), STEP_RESULT) },
    (r) => refused(slept, r),
  );
  return list;
};

export const JOURNAL_CASES: readonly JournalCase[] = cases();
