/**
 * The `workflow` node: a child run (issue 10, "Node types"; spec, "Where a credential or connected
 * account may be named": `from_repo`). Exactly one of:
 * - `graph: <stored graph name>`, with `input` (default `{}`): a run of the project's stored graph
 *   as it is now (filename `graph:<name>`);
 * - `script: <source>`, with `filename` (default the node id) and `interpreter` (default: by the
 *   filename's extension, core's pickInterpreter: `build.py` python3, none bash -eu): a script run;
 * - `from_repo: {repo: "owner/name", path, ref?, credential}`: the file read through the forge's
 *   contents API (GitHub: `GET /repos/{owner}/{repo}/contents/{path}`, `Accept:
 *   application/vnd.github.raw`), authenticated with the credential's token as a bearer token; the
 *   credential must be of kind bearer or url-token (anything else is refused before any request).
 *   The script runs as a child run named after the file's base name (its interpreter picked by its
 *   extension unless `interpreter` is given). The forge's base URL is the server's
 *   FLOWSVC_CONNECTOR_BASE_URLS `github` entry (a test peer), else https://api.github.com.
 *
 * The child is as trusted as its parent and is the parent's child (`parent_run_id`); the node ends
 * when the child ends, with its status and output. The child's idempotency key is the node's
 * attempt, so an attempt run again (a server restarted mid-attempt) finds its child, never starts
 * a second one.
 */
import { request } from "undici";
import { FROM_REPO_KINDS, FlowError, REPO_FULL_NAME, pickInterpreter, textProblem } from "@flowsvc/core";
import { createRun, getStoredGraph, startGraphRun, withTransaction } from "@flowsvc/store";
import type { NodeContext, NodeExecutor, NodeOutcome } from "./types.js";
import { asConfig, requiredStr, str, type Config } from "./config.js";

/** The forge's API root when the configuration names none. */
export const DEFAULT_FORGE_API = "https://api.github.com";
/** Largest file `from_repo` reads, in bytes. */
export const FROM_REPO_MAX_BYTES = 1024 * 1024;
const FROM_REPO_TIMEOUT_MS = 30_000;

let forgeApi = DEFAULT_FORGE_API;

/** The server's connector base URLs (core's parseConnectorBaseUrls): `from_repo` reads through the `github` one. Set once at start-up. */
export const setForgeBaseUrls = (urls: Readonly<Record<string, string>>): void => {
  forgeApi = (urls["github"] ?? DEFAULT_FORGE_API).replace(/\/+$/, "");
};

const keyOf = (ctx: NodeContext): string => `graph-node:${ctx.run.id}:${ctx.node.id}:${ctx.attempt}`;

const graphChild = async (ctx: NodeContext, name: string, input: unknown): Promise<NodeOutcome> => {
  const stored = await getStoredGraph(ctx.db, ctx.run.projectId, name);
  if (!stored) return { kind: "failed", error: `config.graph: no stored graph ${JSON.stringify(name)} in this project (flow graph ls)` };
  const child = await withTransaction(ctx.db, (tx) =>
    startGraphRun(tx, {
      projectId: ctx.run.projectId,
      name,
      source: stored.source,
      document: stored.document,
      input: input ?? {},
      trigger: { type: "spawn", parent: ctx.run.id },
      trusted: ctx.run.trusted,
      parentRunId: ctx.run.id,
      idempotencyKey: keyOf(ctx),
    }),
  );
  return { kind: "child", runId: child.id };
};

const scriptChild = async (
  ctx: NodeContext,
  s: { source: string; filename: string; interpreter: string | undefined },
): Promise<NodeOutcome> => {
  const problem = textProblem(s.source);
  if (problem !== undefined) return { kind: "failed", error: `the script ${s.filename} cannot be run: ${problem}` };
  const child = await withTransaction(ctx.db, (tx) =>
    createRun(tx, {
      projectId: ctx.run.projectId,
      source: s.source,
      filename: s.filename,
      interpreter: pickInterpreter(s.filename, s.interpreter),
      trigger: { type: "spawn", parent: ctx.run.id },
      trusted: ctx.run.trusted,
      parentRunId: ctx.run.id,
      idempotencyKey: keyOf(ctx),
    }),
  );
  return { kind: "child", runId: child.id };
};

interface FromRepo {
  repo: string;
  path: string;
  ref: string | undefined;
  credential: string;
}

/** A field of `from_repo`, its problems named `config.from_repo.<field>`. */
const nested = <T>(read: () => T): T => {
  try {
    return read();
  } catch (e) {
    if (e instanceof FlowError) throw new FlowError("invalid_argument", e.message.replace(/^config\./, "config.from_repo."));
    throw e;
  }
};

const fromRepoOf = (c: Config): FromRepo => {
  const v = c["from_repo"];
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new FlowError("invalid_argument", "config.from_repo: must be an object {repo, path, credential}");
  const r = v as Config;
  const repo = nested(() => requiredStr(r, "repo"));
  if (!REPO_FULL_NAME.test(repo)) throw new FlowError("invalid_argument", "config.from_repo.repo: must be owner/name");
  const path = nested(() => requiredStr(r, "path"));
  if (path.startsWith("/") || path.split("/").includes(".."))
    throw new FlowError("invalid_argument", 'config.from_repo.path: must be a path inside the repository (no leading "/", no "..")');
  return { repo, path, ref: nested(() => str(r, "ref")), credential: nested(() => requiredStr(r, "credential")) };
};

/** The file's text through the forge's contents API; throws with what the forge answered. */
const readRepoFile = async (ctx: NodeContext, f: FromRepo): Promise<string> => {
  const resolved = await ctx.credential(f.credential, FROM_REPO_KINDS);
  const { value } = resolved;
  if (value.kind !== "bearer" && value.kind !== "url_token")
    throw new FlowError(
      "invalid_argument",
      `config.from_repo.credential: ${f.credential} is ${value.kind}; bearer or url-token is required`,
    );
  const path = f.path.split("/").map(encodeURIComponent).join("/");
  const url = `${forgeApi}/repos/${f.repo}/contents/${path}${f.ref ? `?ref=${encodeURIComponent(f.ref)}` : ""}`;
  const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(FROM_REPO_TIMEOUT_MS)]);
  const res = await request(url, {
    method: "GET",
    headers: {
      accept: "application/vnd.github.raw",
      authorization: `Bearer ${value.token}`,
      "user-agent": "flowsvc",
      "x-github-api-version": "2022-11-28",
    },
    signal,
  });
  const body = Buffer.from(await res.body.arrayBuffer());
  if (res.statusCode !== 200)
    throw new FlowError("unavailable", `from_repo: GET ${url} answered ${res.statusCode}: ${body.toString("utf8").slice(0, 200)}`);
  if (body.length > FROM_REPO_MAX_BYTES)
    throw new FlowError("invalid_argument", `from_repo: ${f.repo}/${f.path} is ${body.length} bytes; at most ${FROM_REPO_MAX_BYTES}`);
  return body.toString("utf8");
};

const start = async (ctx: NodeContext): Promise<NodeOutcome> => {
  const c = asConfig(ctx.config);
  const interpreter = str(c, "interpreter");
  const graph = str(c, "graph");
  if (graph !== undefined) return graphChild(ctx, graph, c["input"]);
  const script = str(c, "script");
  if (script !== undefined) return scriptChild(ctx, { source: script, filename: str(c, "filename") ?? ctx.node.id, interpreter });
  if (c["from_repo"] === undefined)
    throw new FlowError("invalid_argument", "config: give exactly one of graph (a stored graph's name), script (its text) or from_repo");
  const f = fromRepoOf(c);
  const source = await readRepoFile(ctx, f);
  return scriptChild(ctx, { source, filename: f.path.split("/").at(-1) ?? f.path, interpreter });
};

export const workflowExecutor: NodeExecutor = {
  type: "workflow",
  start: async (ctx) => {
    try {
      return await start(ctx);
    } catch (e) {
      if (e instanceof FlowError) return { kind: "failed", error: e.message };
      if (e instanceof Error && (e.name === "AbortError" || e.name === "TimeoutError" || "code" in e))
        return { kind: "failed", error: `workflow node ${ctx.node.id}: ${e.message}` };
      throw e;
    }
  },
};
