/**
 * Payloads of the platform's `run.*` events (spec: "Lifecycle event payloads"). Pure: the caller
 * passes the run's fields and the server's public URL, if it knows one.
 */
export const LIFECYCLE_TEXT_LIMIT = 4000;

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

/** Keeps the last `limit` characters: the end of an error says what finally went wrong. */
export const keepTail = (text: string, limit = LIFECYCLE_TEXT_LIMIT): string =>
  text.length > limit ? text.slice(text.length - limit) : text;

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
