/**
 * Where this pass of the script is in the run's journal: the next position, and how many calls of
 * each (kind, name) it has made (the ordinal). Each durable call takes the next position and is
 * matched against what the journal recorded there (core's matchJournal: the replay rules).
 */
import { hash } from "node:crypto";
import { indexJournal, matchJournal, parkedPosition } from "@flowsvc/core";
import type { DurableCall, JournalEntry, JournalMatch } from "@flowsvc/core";

export interface CursorCall extends DurableCall {
  readonly position: number;
  readonly match: JournalMatch;
}

/** `FLOW_IDEMPOTENCY_KEY` of the call at `position`: the same on every pass and every attempt (one-shot hash: no Hash object per step). */
export const idempotencyKeyFor = (runId: string, position: number): string =>
  `idk-${hash("sha256", `${runId}\0${position}`, "hex").slice(0, 32)}`;

export class JournalCursor {
  readonly #recorded: ReadonlyMap<number, JournalEntry>;
  readonly #ordinals = new Map<string, number>();
  readonly #parkedAt: number;
  #position = 0;

  constructor(journal: readonly JournalEntry[]) {
    this.#recorded = indexJournal(journal);
    this.#parkedAt = parkedPosition(journal);
  }

  /**
   * Whether an earlier pass received the result recorded at `position`: every one but the call
   * the previous pass parked on (core's parkedPosition), whose result is new to this pass.
   */
  receivedEarlier(position: number): boolean {
    return position !== this.#parkedAt;
  }

  /** Calls made so far on this pass. */
  get position(): number {
    return this.#position;
  }

  /**
   * Takes the next position for a call. Throws FlowError("determinism") when the journal recorded
   * a different call there; the position is spent either way (the pass is over after that).
   */
  next(kind: string, name: string): CursorCall {
    const key = `${kind}\0${name}`;
    const ordinal = this.#ordinals.get(key) ?? 0;
    const position = this.#position;
    this.#ordinals.set(key, ordinal + 1);
    this.#position += 1;
    const call = { kind, name, ordinal };
    return { ...call, position, match: matchJournal(this.#recorded.get(position), call, position) };
  }
}
