/**
 * Payloads of the platform's `run.*` events (spec: "Lifecycle event payloads"). Pure: the caller
 * passes the run's fields and the server's public URL, if it knows one.
 */
export const LIFECYCLE_TEXT_LIMIT = 4000;

/**
 * Longest reason a user may give for a cancel (64 Ki characters): longer is refused, naming this
 * limit; a reason up to it is taken and cut to its last LIFECYCLE_TEXT_LIMIT characters.
 */
export const CANCEL_REASON_LIMIT = 65_536;

export type LifecycleType = "run.started" | "run.succeeded" | "run.failed" | "run.cancelled" | "run.awaiting" | "run.wait_expired";

export interface LifecycleRun {
  id: string;
  status: string;
  workflow: string;
  tags: readonly string[];
  trigger: Record<string, unknown>;
  org: string;
  project: string;
}

const isHighSurrogate = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff;
const isLowSurrogate = (unit: number): boolean => unit >= 0xdc00 && unit <= 0xdfff;

/**
 * Keeps the last `limit` characters (UTF-16 units, as every length limit of the API counts): the end
 * of an error says what finally went wrong. The cut falls on a code point boundary: when it would
 * split a surrogate pair (an emoji), the pair's low half is dropped too, so the tail is one shorter.
 */
export const keepTail = (text: string, limit = LIFECYCLE_TEXT_LIMIT): string => {
  if (text.length <= limit) return text;
  let start = text.length - limit;
  if (isLowSurrogate(text.charCodeAt(start)) && isHighSurrogate(text.charCodeAt(start - 1))) start++;
  return text.slice(start);
};

/** `k:v` tags as a map; plain tags appear only in `tags`. */
export const tagMap = (tags: readonly string[]): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const t of tags) {
    const i = t.indexOf(":");
    if (i > 0) out[t.slice(0, i)] = t.slice(i + 1);
  }
  return out;
};

const TRIGGER_FIELDS = ["type", "sha", "ref", "repo", "sender", "forge"] as const;

export const lifecyclePayload = (
  run: LifecycleRun,
  extra: Record<string, unknown>,
  publicUrl: string | undefined,
): Record<string, unknown> => {
  // The spec: "a manual submit has `type` manual only".
  const type = typeof run.trigger["type"] === "string" ? run.trigger["type"] : "manual";
  const trigger: Record<string, unknown> = { type };
  if (type !== "manual")
    for (const f of TRIGGER_FIELDS) if (run.trigger[f] !== undefined && run.trigger[f] !== null) trigger[f] = run.trigger[f];
  const payload: Record<string, unknown> = {
    run_id: run.id,
    status: run.status,
    workflow: run.workflow,
    tags: [...run.tags],
    tag: tagMap(run.tags),
    trigger,
    ...extra,
  };
  if (typeof payload["error"] === "string") payload["error"] = keepTail(payload["error"]);
  if (typeof payload["reason"] === "string") payload["reason"] = keepTail(payload["reason"]);
  if (publicUrl)
    payload["run_url"] = `${publicUrl.replace(/\/+$/, "")}/runs/${run.id}?project=${encodeURIComponent(`${run.org}/${run.project}`)}`;
  return payload;
};
