/**
 * A graph's credential requirements (spec, "Graph requirements report"; "Where a credential or
 * connected account may be named"), the report, and the submit-time check. The state of each name
 * comes from core's one resolver (`checkConnection`), as at dispatch and at claim.
 *
 * Where a graph names a credential:
 * - `http`: `config.credential` (any kind);
 * - `code`, `shell`: `config.credentials`, a map `ENV_VAR -> name` (any kind);
 * - `workflow`: `config.from_repo.credential` (bearer or url-token: the forge's contents API);
 * - a connector type: `config.credential`, of the kinds its manifest lists.
 *
 * A name given as `{"$expr": ...}` or `{"$template": ...}` is dynamic: it is known only when the
 * node runs, so the report cannot check it. It is listed under the report's `dynamic`, not under
 * `credentials` (whose `name` is always a string), and does not change `ready`; at dispatch a
 * dynamic name that matches nothing (or the wrong kind) fails the node before anything is sent.
 */
import { FlowError } from "../errors.js";
import { CLI_KIND_SPELLINGS, type CredentialKind } from "../credentials/kinds.js";
import { checkConnection, type ConnectionState, type NameHolding } from "../credentials/resolve.js";
import type { GraphDocument, GraphNode } from "./model.js";
import { CONNECTOR_TYPE } from "./model.js";
import type { ManifestInfo } from "./node-configs.js";

/** The kinds a `workflow` node's `from_repo.credential` may be: the forge reads it as a token. */
export const FROM_REPO_KINDS: readonly CredentialKind[] = ["bearer", "url_token"];

export interface CredentialRequirement {
  node_id: string;
  /** null: the name is an expression, resolved only when the node runs. */
  name: string | null;
  /** The kinds the use accepts; absent: any kind. */
  required_kinds?: CredentialKind[];
  /** A connector manifest's `credential.required`; true for every other use. A named credential is always checked. */
  required: boolean;
}

export interface RequirementEntry {
  node_id: string;
  name: string;
  /** The kind the graph fixes (stored spelling); several accepted kinds are joined with `|` (`bearer|url_token`). */
  required_kind?: string;
  /** The accepted kinds as a list, when the graph fixes any. */
  required_kinds?: CredentialKind[];
  /** What is stored under the name, when something is. */
  stored_kind?: CredentialKind;
  state: ConnectionState;
  /** Why it is not `ok`, a sentence naming the credential; absent when `ok`. */
  problem?: string;
}

export interface RequirementsReport {
  /** Every named credential is `ok` (dynamic names do not count: they are checked at dispatch). */
  ready: boolean;
  credentials: RequirementEntry[];
  /** The nodes whose credential name is an expression. */
  dynamic: Array<{ node_id: string; required_kind?: string }>;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A literal name, `null` for an expression, undefined when there is none. */
const nameOf = (value: unknown): string | null | undefined => {
  if (typeof value === "string") return value;
  if (isPlainObject(value) && ("$expr" in value || "$template" in value)) return null;
  return undefined;
};

const requirement = (
  node: GraphNode,
  value: unknown,
  kinds: readonly CredentialKind[] | undefined,
  required = true,
): CredentialRequirement[] => {
  const name = nameOf(value);
  if (name === undefined) return [];
  return [{ node_id: node.id, name, ...(kinds ? { required_kinds: [...kinds] } : {}), required }];
};

const nodeRequirements = (
  node: GraphNode,
  manifestOf: ((type: string) => ManifestInfo | undefined) | undefined,
): CredentialRequirement[] => {
  const { config } = node;
  switch (node.type) {
    case "http":
      return requirement(node, config["credential"], undefined);
    case "code":
    case "shell": {
      const map = config["credentials"];
      if (!isPlainObject(map)) return [];
      return Object.values(map).flatMap((name) => requirement(node, name, undefined));
    }
    case "workflow": {
      const repo = config["from_repo"];
      return isPlainObject(repo) ? requirement(node, repo["credential"], FROM_REPO_KINDS) : [];
    }
    default: {
      if (!CONNECTOR_TYPE.test(node.type)) return [];
      const manifest = manifestOf?.(node.type);
      const kinds = manifest?.credential.kinds as readonly CredentialKind[] | undefined;
      return requirement(node, config["credential"], kinds, manifest?.credential.required ?? true);
    }
  }
};

/** Every credential the graph names, node by node in document order. */
export const graphCredentialRequirements = (
  graph: GraphDocument,
  manifestOf?: (type: string) => ManifestInfo | undefined,
): CredentialRequirement[] => graph.nodes.flatMap((node) => nodeRequirements(node, manifestOf));

const kindText = (kinds: readonly CredentialKind[]): string => kinds.join("|");

/** The report: each named credential's state by core's resolver, given what the project holds under each name. */
export const requirementsReport = (
  requirements: readonly CredentialRequirement[],
  holdings: (name: string) => NameHolding | undefined,
): RequirementsReport => {
  const credentials: RequirementEntry[] = [];
  const dynamic: RequirementsReport["dynamic"] = [];
  for (const req of requirements) {
    const kinds = req.required_kinds;
    if (req.name === null) {
      dynamic.push({ node_id: req.node_id, ...(kinds ? { required_kind: kindText(kinds) } : {}) });
      continue;
    }
    const check = checkConnection(req.name, holdings(req.name), kinds);
    credentials.push({
      node_id: req.node_id,
      name: req.name,
      ...(kinds ? { required_kind: kindText(kinds), required_kinds: [...kinds] } : {}),
      ...(check.stored_kind ? { stored_kind: check.stored_kind } : {}),
      state: check.state,
      ...(check.problem ? { problem: check.problem } : {}),
    });
  }
  return { ready: credentials.every((c) => c.state === "ok"), credentials, dynamic };
};

const spelled = (kinds: readonly CredentialKind[]): string => kinds.map((k) => CLI_KIND_SPELLINGS[k]).join(" or ");

/** One sentence for a credential that is not ok: names the node, the required kind and the stored kind. */
const entryMessage = (e: RequirementEntry): string => {
  const name = JSON.stringify(e.name);
  const required = e.required_kinds ? spelled(e.required_kinds) : undefined;
  switch (e.state) {
    case "missing":
      return `node ${e.node_id}: credential ${name} is missing${required ? ` (required kind ${required})` : ""}`;
    case "wrong_kind":
      return `node ${e.node_id}: credential ${name} is ${e.stored_kind ? CLI_KIND_SPELLINGS[e.stored_kind] : "of another kind"}, node ${e.node_id} needs ${required ?? "another kind"}`;
    default:
      return `node ${e.node_id}: ${e.problem ?? `credential ${name} is ${e.state}`}`;
  }
};

/**
 * The submit-time check: undefined when the report is ready, else an invalid_argument error whose
 * message has one sentence per credential that is not ok (`node fetch: credential "gh" is basic,
 * node fetch needs bearer or url-token`), and whose details carry the report.
 */
export const submitCheck = (report: RequirementsReport): FlowError | undefined => {
  const bad = report.credentials.filter((c) => c.state !== "ok");
  if (bad.length === 0) return undefined;
  return new FlowError("invalid_argument", bad.map(entryMessage).join("; "), {
    hint: "set the credentials with `flow credential set <name> --kind ...`; `flow graph requirements <name>` shows a stored graph's report",
    details: { credentials: report.credentials },
  });
};
