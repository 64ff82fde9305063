/**
 * Connector nodes (spec, "Graph document shape": connector kinds; "Credential" rule 4; "Approval
 * gates and model-assisted deploys" rule 4). A connector is data: a manifest says where its one
 * action goes, which credential kinds it expects and whether one is required, which `with`
 * parameters it takes (path or body, their types), and how the node's `input` enters the body.
 * One generic builder (buildConnectorRequest) turns a node's evaluated config into a request; the
 * controller's connector executor sends it, save-time checks and the requirements report read
 * `credential`. No code path per connector.
 *
 * A connector node's config: `credential` (a name), `with` (the action's parameters), `input`
 * (the action's main input, when it has one), `headers` (explicit headers; they win over the
 * credential's header of the same name, spec Credential rule 2).
 *
 * Base URLs are the real APIs; a server may point a provider elsewhere (the test peers) through
 * its configuration: `FLOWSVC_CONNECTOR_BASE_URLS='{"anthropic":"http://127.0.0.1:8123"}'`, parsed
 * by parseConnectorBaseUrls (the one rule both deployables' configs call).
 *
 * Zod-free, like approval-fields.ts: the rules are small and `flow check` may run them client-side.
 */
import { CLI_KIND_SPELLINGS, type CredentialKind } from "../credentials/kinds.js";
import { FlowError } from "../errors.js";
import { textProblem } from "../json-guard.js";
import type { ParseGraphOptions } from "./parse.js";

export type ConnectorParamType = "string" | "integer" | "json";

export interface ConnectorParam {
  readonly type: ConnectorParamType;
  readonly required?: boolean;
  /** `path`: replaces `{name}` in the path (one segment, percent-encoded); default `body`. */
  readonly in?: "path" | "body";
  /** The values allowed (strings only). */
  readonly enum?: readonly string[];
  /** A pattern a path parameter must match. */
  readonly pattern?: RegExp;
  /** The inclusive range of an integer. */
  readonly range?: readonly [number, number];
}

/** A connector's one action, as data. */
export interface ConnectorSpec {
  /** The node type: `<provider>.<action>`. */
  readonly type: string;
  /** The provider part, the key of a base URL override. */
  readonly provider: string;
  readonly method: "POST";
  /** The real API's base URL (https). */
  readonly baseUrl: string;
  /** The path after the base URL, with `{param}` holes filled from `with`. */
  readonly path: string;
  readonly credential: { readonly kinds: readonly CredentialKind[]; readonly required: boolean };
  /** Headers every request carries (the config's `headers` may override them). */
  readonly headers: Readonly<Record<string, string>>;
  /** The `with` parameters the action knows; others pass into the body as they are. */
  readonly params: Readonly<Record<string, ConnectorParam>>;
  /** How the config's `input` enters the body: as the one user message, as a body field, or not at all. */
  readonly input:
    { readonly as: "user-message"; readonly required: boolean } | { readonly as: "field"; readonly field: string } | undefined;
  /** A body field that must be `true` in a 2xx answer for the call to count as done (Slack's `ok`). */
  readonly okField?: string;
  /** Where the answer's main text is, for the docs (`body.content[0].text`). */
  readonly replyAt?: string;
}

export interface ConnectorRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: unknown;
}

export interface ConnectorRequestOptions {
  /** Base URL per provider, from the server's configuration; absent providers use the real API. */
  baseUrls?: Readonly<Record<string, string>>;
}

/** The contract's manifest: the spec with its builder. */
export interface ConnectorManifest extends ConnectorSpec {
  request(config: unknown, options?: ConnectorRequestOptions): ConnectorRequest;
}

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8", accept: "application/json" } as const;
const GITHUB_NAME = /^[A-Za-z0-9._-]{1,100}$/;

export const CONNECTOR_SPECS: readonly ConnectorSpec[] = [
  {
    type: "slack.post_message",
    provider: "slack",
    method: "POST",
    baseUrl: "https://slack.com/api",
    path: "/chat.postMessage",
    credential: { kinds: ["bearer"], required: true },
    headers: JSON_HEADERS,
    params: {
      channel: { type: "string", required: true },
      text: { type: "string", required: true },
      thread_ts: { type: "string" },
      blocks: { type: "json" },
    },
    input: { as: "field", field: "text" },
    okField: "ok",
    replyAt: "body.ts",
  },
  {
    type: "anthropic.messages",
    provider: "anthropic",
    method: "POST",
    baseUrl: "https://api.anthropic.com",
    path: "/v1/messages",
    credential: { kinds: ["api_key"], required: true },
    headers: { ...JSON_HEADERS, "anthropic-version": "2023-06-01" },
    params: {
      model: { type: "string", required: true },
      max_tokens: { type: "integer", required: true, range: [1, 1_000_000] },
      system: { type: "json" },
      temperature: { type: "json" },
      stop_sequences: { type: "json" },
    },
    input: { as: "user-message", required: true },
    replyAt: "body.content[0].text",
  },
  {
    type: "github.report_run_status",
    provider: "github",
    method: "POST",
    baseUrl: "https://api.github.com",
    path: "/repos/{owner}/{repo}/statuses/{sha}",
    credential: { kinds: ["bearer"], required: true },
    headers: { ...JSON_HEADERS, accept: "application/vnd.github+json", "x-github-api-version": "2022-11-28", "user-agent": "flowsvc" },
    params: {
      owner: { type: "string", required: true, in: "path", pattern: GITHUB_NAME },
      repo: { type: "string", required: true, in: "path", pattern: GITHUB_NAME },
      sha: { type: "string", required: true, in: "path", pattern: /^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$/ },
      state: { type: "string", required: true, enum: ["error", "failure", "pending", "success"] },
      target_url: { type: "string" },
      description: { type: "string" },
      context: { type: "string" },
    },
    input: undefined,
    replyAt: "body.state",
  },
];

/** Every connector node type, in the order above. */
export const CONNECTOR_TYPES: readonly string[] = CONNECTOR_SPECS.map((s) => s.type);
/** Every provider a base URL override may name. */
export const CONNECTOR_PROVIDERS: readonly string[] = [...new Set(CONNECTOR_SPECS.map((s) => s.provider))];

/** Longest string parameter or input, in characters (a prompt with a diff in it fits). */
export const CONNECTOR_TEXT_MAX = 1024 * 1024;
/** The config keys a connector node takes. */
const CONFIG_KEYS: readonly string[] = ["credential", "with", "input", "headers"];
/** Request headers a node may not set: they frame the request or the connection. */
const FORBIDDEN_HEADERS: readonly string[] = [
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
  "expect",
];
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

const shown = (value: string): string => JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}...` : value);
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
/** `{"$expr": ...}` or `{"$template": ...}` not yet evaluated (a check before dispatch): judged only once evaluated. */
const isDeferred = (v: unknown): boolean => isRecord(v) && Object.keys(v).length === 1 && ("$expr" in v || "$template" in v);

const stringProblem = (value: string): string | undefined => {
  if (value.length > CONNECTOR_TEXT_MAX) return `is ${value.length} characters long; at most ${CONNECTOR_TEXT_MAX} are allowed`;
  return textProblem(value);
};

const integerProblem = (p: ConnectorParam, value: unknown): string | undefined => {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) return "must be a whole number";
  if (p.range && (value < p.range[0] || value > p.range[1])) return `must be from ${p.range[0]} to ${p.range[1]}`;
  return undefined;
};

const stringParamProblem = (p: ConnectorParam, value: unknown): string | undefined => {
  if (typeof value !== "string") return "must be a string";
  if (value === "") return "is empty";
  // Percent-encoding keeps `/` in its segment, but the URL parser still resolves `.` and `..`:
  // `{base}/repos/../../statuses` would leave the base URL's path, the credential with it.
  if (p.in === "path" && (value === "." || value === "..")) return `${shown(value)} is a dot segment, not a name`;
  if (p.enum && !p.enum.includes(value)) return `must be one of ${p.enum.join(", ")}; got ${shown(value)}`;
  if (p.pattern && !p.pattern.test(value)) return `${shown(value)} is not allowed here`;
  return stringProblem(value);
};

/** Why one `with` value does not fit its parameter; undefined when it does. */
const paramProblem = (p: ConnectorParam, value: unknown): string | undefined => {
  if (p.type === "integer") return integerProblem(p, value);
  return p.type === "json" ? undefined : stringParamProblem(p, value);
};

const headersProblems = (headers: unknown): string[] => {
  if (headers === undefined) return [];
  if (!isRecord(headers)) return ["headers: must be an object of header names to strings"];
  const problems: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    const at = `headers[${shown(name)}]`;
    if (!HEADER_NAME.test(name)) problems.push(`${at}: not an HTTP header name`);
    else if (FORBIDDEN_HEADERS.includes(name.toLowerCase())) problems.push(`${at}: frames the request and cannot be set`);
    else if (typeof value !== "string") problems.push(`${at}: must be a string`);
    else if (CONTROL.test(value) || value.length > 8192) problems.push(`${at}: holds a control character or is over 8192 characters`);
  }
  return problems;
};

const withProblems = (spec: ConnectorSpec, given: Record<string, unknown>): string[] => {
  const problems: string[] = [];
  for (const [name, p] of Object.entries(spec.params)) {
    const value = given[name];
    const fromInput = spec.input?.as === "field" && spec.input.field === name;
    if (value === undefined) {
      if (p.required === true && !fromInput) problems.push(`with.${name}: required`);
      continue;
    }
    const problem = isDeferred(value) ? undefined : paramProblem(p, value);
    if (problem !== undefined) problems.push(`with.${name}: ${problem}`);
  }
  return problems;
};

/** Whether the node must give an input: the model's prompt, or a required body field no `with` value fills. */
const missingInput = (spec: ConnectorSpec, config: Record<string, unknown>): string | undefined => {
  if (spec.input?.as === "user-message") return spec.input.required ? "input: required (the prompt text)" : undefined;
  if (spec.input?.as !== "field") return undefined;
  const with_ = isRecord(config["with"]) ? config["with"] : {};
  const needed = spec.params[spec.input.field]?.required === true && with_[spec.input.field] === undefined;
  return needed ? `input: required (the ${spec.input.field} text, or with.${spec.input.field})` : undefined;
};

const inputProblems = (spec: ConnectorSpec, config: Record<string, unknown>): string[] => {
  const input = config["input"];
  if (spec.input === undefined) return input === undefined ? [] : [`input: ${spec.type} takes no input (use with)`];
  if (input === undefined || input === "") {
    const missing = missingInput(spec, config);
    return missing === undefined ? [] : [missing];
  }
  if (isDeferred(input)) return [];
  if (typeof input !== "string") return ["input: must be a string"];
  const p = stringProblem(input);
  return p === undefined ? [] : [`input: ${p}`];
};

const credentialProblem = (spec: ConnectorSpec, cred: unknown): string | undefined => {
  if (cred === undefined)
    return spec.credential.required
      ? `credential: required: ${spec.type} needs a credential of kind ${spec.credential.kinds.map((k) => CLI_KIND_SPELLINGS[k]).join(" or ")}`
      : undefined;
  return typeof cred === "string" || isDeferred(cred) ? undefined : "credential: must be a credential name";
};

/**
 * Every problem of a connector node's config, each named by its place under `where`
 * (`nodes[2].config.with.model: required`). Config `$expr`/`$template` values are evaluated
 * before this runs at dispatch; at check time an unevaluated `{"$expr": ...}` value is not judged.
 */
export const connectorConfigProblems = (spec: ConnectorSpec, config: unknown, where = "config"): string[] => {
  if (!isRecord(config)) return [`${where}: must be an object`];
  const problems: string[] = [];
  for (const key of Object.keys(config))
    if (!CONFIG_KEYS.includes(key))
      problems.push(`${key}: not ${/^[aeiou]/.test(spec.type) ? "an" : "a"} ${spec.type} setting (${CONFIG_KEYS.join(", ")})`);
  const cred = credentialProblem(spec, config["credential"]);
  if (cred !== undefined) problems.push(cred);
  const with_ = config["with"] ?? {};
  if (!isRecord(with_)) problems.push("with: must be an object");
  else problems.push(...withProblems(spec, with_));
  problems.push(...inputProblems(spec, config), ...headersProblems(config["headers"]));
  return problems.map((p) => `${where}.${p}`);
};

const baseUrlOf = (spec: ConnectorSpec, options: ConnectorRequestOptions | undefined): string =>
  (options?.baseUrls?.[spec.provider] ?? spec.baseUrl).replace(/\/+$/, "");

/** The body: the `with` values that are not path parameters, then the input where the manifest puts it. */
const bodyOf = (spec: ConnectorSpec, with_: Record<string, unknown>, input: unknown): Record<string, unknown> => {
  const body = new Map<string, unknown>();
  for (const [k, v] of Object.entries(with_)) if (spec.params[k]?.in !== "path") body.set(k, v);
  if (typeof input === "string" && input !== "") {
    if (spec.input?.as === "user-message") body.set("messages", [{ role: "user", content: input }]);
    else if (spec.input?.as === "field" && !body.has(spec.input.field)) body.set(spec.input.field, input);
  }
  return Object.fromEntries(body);
};

/**
 * The request a connector node's (evaluated) config becomes, without auth: the executor adds the
 * credential's auth after this (an explicit header here wins over it). Throws invalid_argument
 * naming every problem. Pure.
 */
export const buildConnectorRequest = (spec: ConnectorSpec, config: unknown, options?: ConnectorRequestOptions): ConnectorRequest => {
  const problems = connectorConfigProblems(spec, config);
  if (problems.length > 0) throw new FlowError("invalid_argument", `${spec.type}: ${problems.join("; ")}`, { details: { problems } });
  const c = config as Record<string, unknown>;
  const with_ = (c["with"] ?? {}) as Record<string, unknown>;
  const path = spec.path.replace(/\{([a-z_]+)\}/g, (_, name: string) => encodeURIComponent(String(with_[name])));
  const headers = new Map<string, string>(Object.entries(spec.headers));
  for (const [k, v] of Object.entries((c["headers"] ?? {}) as Record<string, string>)) {
    for (const existing of [...headers.keys()]) if (existing.toLowerCase() === k.toLowerCase()) headers.delete(existing);
    headers.set(k, v);
  }
  return {
    method: spec.method,
    url: `${baseUrlOf(spec, options)}${path}`,
    headers: Object.fromEntries(headers),
    body: bodyOf(spec, with_, c["input"]),
  };
};

const MANIFESTS: ReadonlyMap<string, ConnectorManifest> = new Map(
  CONNECTOR_SPECS.map((spec) => [
    spec.type,
    { ...spec, request: (config: unknown, options?: ConnectorRequestOptions) => buildConnectorRequest(spec, config, options) },
  ]),
);

/** The manifest of a connector node type; undefined for any other type. */
export const connectorManifest = (type: string): ConnectorManifest | undefined => MANIFESTS.get(type);

/**
 * What every check of a graph document is given (a submit, a save, `flow call`, a FlowGraph, as
 * `flow check` is): each connector type's manifest and the connector's whole config check, so a
 * connector node with a missing `with` parameter or an unknown key is refused at its path before
 * anything is saved or run, not when the node runs.
 */
export const CONNECTOR_CHECKS: ParseGraphOptions = {
  manifestOf: connectorManifest,
  connectorProblems: (type, config) => {
    const manifest = connectorManifest(type);
    return manifest ? connectorConfigProblems(manifest, config) : [];
  },
};

const LOCAL_HOSTS: readonly string[] = ["localhost", "127.0.0.1", "[::1]"];

const jsonObjectOf = (value: unknown, where: string): Record<string, unknown> => {
  let data = value;
  if (typeof value === "string") {
    try {
      data = value === "" ? {} : JSON.parse(value);
    } catch {
      data = null;
    }
  }
  if (data === undefined) return {};
  if (!isRecord(data))
    throw new FlowError("config", `${where}: must be a JSON object of provider to base URL, e.g. {"anthropic":"https://..."}`);
  return data;
};

/** One override checked: the URL as used, or a throw naming the provider. */
const baseUrlChecked = (provider: string, url: unknown, where: string): string => {
  const at = `${where}.${provider}`;
  if (!CONNECTOR_PROVIDERS.includes(provider))
    throw new FlowError("config", `${at}: no connector provider is called that (${CONNECTOR_PROVIDERS.join(", ")})`);
  let parsed: URL;
  try {
    parsed = new URL(String(url));
  } catch {
    throw new FlowError("config", `${at}: must be an absolute URL`);
  }
  const local = LOCAL_HOSTS.includes(parsed.hostname);
  if (parsed.protocol !== "https:" && !(parsed.protocol === "http:" && local))
    throw new FlowError("config", `${at}: must be https (plain http only for localhost)`);
  if (parsed.search !== "" || parsed.hash !== "" || parsed.username !== "" || parsed.password !== "")
    throw new FlowError("config", `${at}: must have no query, fragment or user`);
  return parsed.href.replace(/\/+$/, "");
};

/**
 * `FLOWSVC_CONNECTOR_BASE_URLS` (a JSON object, provider -> base URL), or the same object from a
 * config file: a known provider each, an absolute URL without query or fragment, https unless it is
 * the local host (a test peer). Throws config naming the provider.
 */
export const parseConnectorBaseUrls = (value: unknown, where = "FLOWSVC_CONNECTOR_BASE_URLS"): Record<string, string> => {
  const data = jsonObjectOf(value, where);
  return Object.fromEntries(Object.entries(data).map(([provider, url]) => [provider, baseUrlChecked(provider, url, where)]));
};
