/**
 * Approval gates (spec, "Approval gates and model-assisted deploys"; "Parked runs and waits"). An
 * `approval` node parks the run on a signal named after the node, with what a person is asked
 * (`prompt`, already evaluated when it was a `$template`) and the declared `fields`; a `timeout`
 * (humantime) sets a deadline, after which the engine resumes the node with `{timed_out: true}`.
 * The gate is cleared by the approvals route (ingest/src/routes/approvals.ts: user authentication,
 * fields checked) or by a signal sent directly (no field check, as the spec says).
 *
 * On wake the engine asks approvalWakeOutcome: an answer whose `decision` is `reject` fails the
 * node (its dependents do not run; the run fails), anything else succeeds with the payload as the
 * node's output (`nodes.<gate>.output.<field>`, `.decision`, `.approved_by`).
 */
import { FlowError, parseApprovalFields, parseDuration } from "@flowsvc/core";
import type { NodeContext, NodeExecutor, NodeOutcome } from "./types.js";

/** Longest prompt, in characters (a model's advice pasted in through `$template` fits). */
export const APPROVAL_PROMPT_MAX = 64 * 1024;

const CONFIG_KEYS: readonly string[] = ["prompt", "fields", "timeout"];

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const promptOf = (ctx: NodeContext, config: Record<string, unknown>): string => {
  const prompt = config["prompt"];
  if (prompt === undefined) return `Approve ${ctx.node.id}?`;
  if (typeof prompt !== "string") throw new FlowError("invalid_argument", "config.prompt: must be a string (or a $template)");
  if (prompt.length > APPROVAL_PROMPT_MAX)
    throw new FlowError(
      "invalid_argument",
      `config.prompt: is ${prompt.length} characters long; at most ${APPROVAL_PROMPT_MAX} are allowed`,
    );
  return prompt;
};

const deadlineOf = (config: Record<string, unknown>, now: number): Date | undefined => {
  const timeout = config["timeout"];
  if (timeout === undefined) return undefined;
  if (typeof timeout !== "string") throw new FlowError("invalid_argument", 'config.timeout: must be a duration such as "30m"');
  try {
    return new Date(now + parseDuration(timeout));
  } catch (e) {
    throw new FlowError("invalid_argument", `config.timeout: ${e instanceof Error ? e.message : String(e)}`);
  }
};

/** The park outcome of an approval node's config; throws invalid_argument naming the config path. */
export const approvalPark = (ctx: NodeContext, now = Date.now()): NodeOutcome => {
  const config = ctx.config ?? {};
  if (!isRecord(config)) throw new FlowError("invalid_argument", "config: must be an object");
  const unknown = Object.keys(config).filter((k) => !CONFIG_KEYS.includes(k));
  if (unknown.length > 0)
    throw new FlowError("invalid_argument", `config.${unknown[0]}: not an approval setting (${CONFIG_KEYS.join(", ")})`);
  const fields = parseApprovalFields(config["fields"], "config.fields");
  if (!fields.ok) throw new FlowError("invalid_argument", fields.problems.map((p) => `${p.path}: ${p.message}`).join("; "));
  const deadline = deadlineOf(config, now);
  return {
    kind: "park",
    signal: ctx.node.id,
    ...(deadline ? { deadline } : {}),
    awaiting: { prompt: promptOf(ctx, config), fields: fields.fields },
  };
};

/**
 * What a woken gate becomes: a `reject` answer fails the node, naming who rejected it; any other
 * payload (an approval, a signal sent directly, `{timed_out: true}`) succeeds with it as the output.
 * `sender` is the person whose token sent the signal that woke it (none for a timeout): an object
 * payload's `approved_by` is always that person, so a signal sent directly (which skips the field
 * check) cannot attribute the answer to someone else.
 */
export const approvalWakeOutcome = (answer: unknown, sender?: string): NodeOutcome => {
  const payload = sender !== undefined && isRecord(answer) ? { ...answer, approved_by: sender } : answer;
  if (isRecord(payload) && payload["decision"] === "reject") {
    const by = typeof payload["approved_by"] === "string" ? ` by ${payload["approved_by"]}` : "";
    return { kind: "failed", error: `the gate was rejected${by}`, output: payload };
  }
  return { kind: "succeeded", output: payload };
};

export const approvalExecutor: NodeExecutor = {
  type: "approval",
  start(ctx: NodeContext): Promise<NodeOutcome> {
    try {
      return Promise.resolve(approvalPark(ctx));
    } catch (e) {
      return Promise.resolve({ kind: "failed", error: e instanceof Error ? e.message : String(e) });
    }
  },
};
