/**
 * Step and activity output at rest (docs/internals.md "Sealed journal"). A step's result and an
 * activity's stdout must replay byte for byte, so they are kept as recorded, but sealed: they may
 * hold a secret the script printed. A sealed value is a string `flowsvc-sealed:1:<name>:<base64>`,
 * stored where the plain value was (the journal's `result`, the activity's `stdout_b64`), so a
 * rerun's copy of the journal carries it unchanged. `<name>` is the seal's AAD name (kind
 * "journal"): `<run id>#<position>` for a step, the activity id for an activity's stdout. Rows
 * written before sealing hold plain values and read as they are.
 */
export const SEALED_JOURNAL_PREFIX = "flowsvc-sealed:1:";

const SEALED = /^flowsvc-sealed:1:([A-Za-z0-9_-]+(?:#\d+)?):([A-Za-z0-9+/]+={0,2})$/;

export interface SealedJournalValue {
  name: string;
  /** The sealed blob (core/src/seal.ts), base64. */
  base64: string;
}

/** The AAD name of a step's sealed result. */
export const stepSealName = (runId: string, position: number): string => `${runId}#${position}`;

export const formatSealedJournalValue = (v: SealedJournalValue): string => `${SEALED_JOURNAL_PREFIX}${v.name}:${v.base64}`;

/** The parts of a sealed value, or undefined for anything else (a plain value written before sealing). */
export const parseSealedJournalValue = (value: unknown): SealedJournalValue | undefined => {
  if (typeof value !== "string" || !value.startsWith(SEALED_JOURNAL_PREFIX)) return undefined;
  const m = SEALED.exec(value);
  if (!m) return undefined;
  return { name: m[1] as string, base64: m[2] as string };
};

/** The run id and position a step's seal name binds it to, or undefined when it is not a step's. */
export const stepOfSealName = (name: string): { runId: string; position: number } | undefined => {
  const m = /^(.+)#(\d+)$/.exec(name);
  return m ? { runId: m[1] as string, position: Number(m[2]) } : undefined;
};
