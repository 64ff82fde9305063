import { FlowError } from "./errors.js";
import { validateEventType } from "./events.js";
import type { EnvelopeFields } from "./envelope.js";
import { verifyManualHmac, type HmacSha256Verifier } from "./hmac.js";

/**
 * The built-in `github` event-hook manifest (spec: "Event hook", "Emitting", "Subjects"; SECURITY.md
 * "Event hooks"): verify `X-Hub-Signature-256` over the raw bytes, then shape a delivery into a
 * bus event: `<hook>.<event>` (`<hook>.pull_request.<action>`), keyed by the repository, with the
 * push and pull-request scalar fields, and marked untrusted when it carries outside code or words.
 */

/** Header names as Node presents them (lowercase). */
export const GITHUB_SIGNATURE_HEADER = "x-hub-signature-256";
export const GITHUB_EVENT_HEADER = "x-github-event";
/** The delivery id; a redelivery repeats it, so ingest dedups on it. */
export const GITHUB_DELIVERY_HEADER = "x-github-delivery";

const SIGNATURE_PREFIX = "sha256=";

/** Comment and review authors whose words may start runs with secrets. */
export const TRUSTED_AUTHOR_ASSOCIATIONS: ReadonlySet<string> = new Set(["OWNER", "MEMBER", "COLLABORATOR"]);

/** Where each comment-like event keeps its author: `<object>.author_association`, `<object>.user.login`. */
const AUTHORED_EVENTS: Readonly<Record<string, string>> = {
  issue_comment: "comment",
  pull_request_review: "review",
  pull_request_review_comment: "comment",
};

/** Whether `headerValue` is `sha256=<hex>` of `rawBody` under the hook's key; missing or malformed is false. `verify`: as verifyManualHmac's. */
export const verifyGithubSignature = (
  key: string,
  rawBody: Uint8Array,
  headerValue: string | string[] | undefined,
  verify?: HmacSha256Verifier,
): Promise<boolean> => verifyManualHmac({ headerValue, prefix: SIGNATURE_PREFIX, key, rawBody, ...(verify ? { verify } : {}) });

export interface ShapedDelivery {
  type: string;
  /** The repository (`owner/name`); absent when the delivery names none (e.g. an org-level ping). */
  key?: string;
  /** The forge's JSON body, whole. */
  payload: unknown;
  fields: EnvelopeFields;
  /** False for a fork's pull request and for comments or reviews from outside the repository. */
  trusted: boolean;
  untrustedReason?: string;
}

type Json = Readonly<Record<string, unknown>>;

const object = (value: unknown): Json | undefined =>
  value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Json) : undefined;

/** The string at `path` under `root`, if every step exists. */
const text = (root: unknown, ...path: string[]): string | undefined => {
  let at: unknown = root;
  for (const step of path) at = object(at)?.[step];
  return typeof at === "string" ? at : undefined;
};

const strings = (value: unknown): value is string[] => Array.isArray(value) && value.every((v) => typeof v === "string");

/** The sorted union of the commits' added, modified and removed files; unknown unless every commit lists them. */
const pushPaths = (commits: unknown): Pick<EnvelopeFields, "paths" | "paths_known"> => {
  if (!Array.isArray(commits) || commits.length === 0) return { paths: [], paths_known: false };
  const paths = new Set<string>();
  for (const commit of commits) {
    const c = object(commit);
    const lists = [c?.["added"], c?.["modified"], c?.["removed"]];
    if (!lists.every(strings)) return { paths: [], paths_known: false };
    for (const list of lists) for (const path of list) paths.add(path);
  }
  return { paths: [...paths].sort(), paths_known: true };
};

const pullRequestFields = (pr: Json): EnvelopeFields => {
  const fields: EnvelopeFields = {};
  const sha = text(pr, "head", "sha");
  const headRef = text(pr, "head", "ref");
  const baseRef = text(pr, "base", "ref");
  if (sha !== undefined) fields.sha = sha;
  if (headRef !== undefined) fields.head_ref = headRef;
  if (baseRef !== undefined) fields.base_ref = baseRef;
  return fields;
};

/** Why a delivery must not see secrets, or undefined when it may. */
const untrustedReason = (eventName: string, body: Json): string | undefined => {
  const pr = object(body["pull_request"]);
  if (pr) {
    const head = text(pr, "head", "repo", "full_name");
    const base = text(pr, "base", "repo", "full_name");
    if (head === undefined || head !== base) {
      const number = typeof pr["number"] === "number" ? ` #${pr["number"]}` : "";
      return `pull request${number} comes from ${head === undefined ? "a deleted or unknown repository" : `the fork ${head}`}, not ${base ?? "the base repository"}`;
    }
  }
  const authored = AUTHORED_EVENTS[eventName];
  if (authored) {
    const association = text(body, authored, "author_association");
    if (association === undefined || !TRUSTED_AUTHOR_ASSOCIATIONS.has(association)) {
      const login = text(body, authored, "user", "login") ?? "an unknown user";
      return `${eventName} by ${login}, whose author_association is ${association ?? "missing"} (not OWNER, MEMBER or COLLABORATOR)`;
    }
  }
  return undefined;
};

/** A delivery's envelope fields: a push's ref, sha and paths, a pull request's, the repository, the sender, the forge. */
const envelopeFields = (eventName: string, json: Record<string, unknown>): EnvelopeFields => {
  const repo = text(json, "repository", "full_name");
  const sender = text(json, "sender", "login");
  const fields: EnvelopeFields = {};
  if (eventName === "push") {
    const ref = text(json, "ref");
    const sha = text(json, "after");
    if (ref !== undefined) fields.ref = ref;
    if (sha !== undefined) fields.sha = sha;
  }
  const pr = object(json["pull_request"]);
  if (pr) Object.assign(fields, pullRequestFields(pr));
  if (repo !== undefined) fields.repo = repo;
  if (sender !== undefined) fields.sender = sender;
  if (eventName === "push") Object.assign(fields, pushPaths(json["commits"]));
  fields.forge = "github";
  return fields;
};

/**
 * Shapes one GitHub delivery (after its signature verified). `eventName` is the `X-GitHub-Event`
 * header; `body` the parsed JSON. Throws FlowError invalid_argument for a delivery that names no
 * event, is not a JSON object, or whose type would not be a valid event type.
 */
export const shapeGithubDelivery = (hookName: string, eventName: string, body: unknown): ShapedDelivery => {
  if (typeof eventName !== "string" || eventName === "") {
    throw new FlowError("invalid_argument", `the ${GITHUB_EVENT_HEADER} header is missing`);
  }
  const json = object(body);
  if (!json) throw new FlowError("invalid_argument", `the GitHub ${eventName} delivery's body is not a JSON object`);

  const action = text(json, "action");
  const type = validateEventType(
    eventName === "pull_request" && action ? `${hookName}.pull_request.${action}` : `${hookName}.${eventName}`,
  );
  const repo = text(json, "repository", "full_name");
  const fields = envelopeFields(eventName, json);
  const reason = untrustedReason(eventName, json);
  return {
    type,
    ...(repo === undefined ? {} : { key: repo }),
    payload: body,
    fields,
    trusted: reason === undefined,
    ...(reason === undefined ? {} : { untrustedReason: reason }),
  };
};
