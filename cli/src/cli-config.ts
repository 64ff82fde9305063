/**
 * The CLI's saved config file: where `flow` finds the server and the token when neither flags nor
 * the environment say. Written by `flow login`, and by `flow server` on its first start.
 *
 * Every user command reads it before its first request, so the read path uses node:fs's readFileSync
 * (loaded with Node itself; no thread pool) and the writer loads node:fs/promises and node:crypto when it runs: each costs a few
 * milliseconds of every command's start-up (issue 15).
 */
import { closeSync, fstatSync, openSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { FlowError, describeIssues } from "@flowsvc/core/errors";
import { PROJECT_REF_PATTERN, httpUrlProblem } from "./config.js";
import { shellWord } from "./shell-quote.js";
import type { Issue } from "./config.js";

export interface CliConfig {
  url: string;
  token: string;
  /** "org/project" */
  project: string;
}

/** The problems of a parsed config file, field by field (plain checks: no zod on the CLI's start-up path). */
const configIssues = (json: unknown): Issue[] => {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return [{ path: [], message: "expected an object" }];
  const { url, token, project } = json as Record<string, unknown>;
  const issues: Issue[] = [];
  const urlProblem = typeof url === "string" ? httpUrlProblem(url) : "expected a string";
  if (urlProblem) issues.push({ path: ["url"], message: urlProblem });
  if (typeof token !== "string") issues.push({ path: ["token"], message: "expected a string" });
  if (typeof project !== "string") issues.push({ path: ["project"], message: "expected a string" });
  else if (!PROJECT_REF_PATTERN.test(project)) issues.push({ path: ["project"], message: "must be org/project" });
  return issues;
};

/** FLOWSVC_CONFIG, else $XDG_CONFIG_HOME/flowsvc/config.json, else ~/.config/flowsvc/config.json. */
export const resolveCliConfigPath = (env: { FLOWSVC_CONFIG?: string; XDG_CONFIG_HOME?: string; HOME?: string }): string => {
  if (env.FLOWSVC_CONFIG) return env.FLOWSVC_CONFIG;
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, "flowsvc", "config.json");
  return join(env.HOME ?? ".", ".config", "flowsvc", "config.json");
};

const isMissing = (err: unknown): boolean => (err as NodeJS.ErrnoException | undefined)?.code === "ENOENT";

/** A saved config as read: its values and the file's permission bits (of the file a symlink leads to). */
export interface SavedCliConfig {
  config: CliConfig;
  mode: number;
}

/** The file's text and mode, by one open: fstat on the descriptor costs no second path lookup and sees the file read (a symlink's target). */
const readWithMode = (path: string): { text: string; mode: number } | undefined => {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw new FlowError("config", `cannot read the CLI config ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    // Synchronous: a config is a few hundred bytes, and the first asynchronous read would start libuv's
    // thread pool and cost a turn of the event loop before the command's first request (issue 15).
    return { mode: fstatSync(fd).mode & 0o7777, text: readFileSync(fd, "utf8") };
  } catch (err) {
    throw new FlowError("config", `cannot read the CLI config ${path}: ${(err as Error).message}`, { cause: err });
  } finally {
    closeSync(fd);
  }
};

const readNow = (path: string): SavedCliConfig | undefined => {
  const file = readWithMode(path);
  if (file === undefined) return undefined;
  const hint = `fix ${path}, or delete it and run \`flow login --url <url> --token <token>\``;
  let json: unknown;
  try {
    json = JSON.parse(file.text);
  } catch (err) {
    throw new FlowError("config", `the CLI config ${path} is not valid JSON`, { hint, cause: err });
  }
  const issues = configIssues(json);
  if (issues.length > 0) throw new FlowError("config", `the CLI config ${path} is invalid: ${describeIssues(issues)}`, { hint });
  const { url, token, project } = json as CliConfig;
  return { config: { url, token, project }, mode: file.mode };
};

/** The saved config and its file's mode, or undefined when there is no file. A file that does not parse is a `config` error (a rejection). */
export const readSavedCliConfig = (path: string): Promise<SavedCliConfig | undefined> => new Promise((resolve) => resolve(readNow(path)));

/** The saved config, or undefined when there is no file. A file that does not parse is a `config` error (a rejection). */
export const readCliConfig = async (path: string): Promise<CliConfig | undefined> => (await readSavedCliConfig(path))?.config;

/**
 * The warning for a config file that holds a token and that its group or others may access (as kubectl
 * warns of a group- or world-readable kubeconfig), or undefined when only its owner may. A warning, not
 * a refusal: refusing would break scripts that worked.
 */
export const looseModeWarning = (path: string, mode: number): string | undefined => {
  const who = [mode & 0o070 ? "group" : "", mode & 0o007 ? "world" : ""].filter((w) => w !== "");
  if (who.length === 0) return undefined;
  const bits = mode & 0o077;
  const access = bits & 0o044 ? "readable" : bits & 0o022 ? "writable" : "accessible";
  const octal = (mode & 0o777).toString(8).padStart(4, "0");
  return `warning: ${path} is ${who.join("- and ")}-${access} (mode ${octal}) and holds an API token; chmod 600 ${shellWord(path)}`;
};

/** The file a symlinked config leads to (so a rewrite keeps the link), else `path` itself. */
const writeTarget = async (path: string): Promise<string> => {
  const { realpath } = await import("node:fs/promises");
  try {
    return await realpath(path);
  } catch (err) {
    if (isMissing(err)) return path;
    throw err;
  }
};

/**
 * Writes the config atomically (temp file + rename), readable by its owner only (0600): a rewrite
 * replaces a wider file with a 0600 one. Directories it creates are 0700 (an existing one is left as
 * it is: FLOWSVC_CONFIG may name a file in a shared directory). A symlinked config keeps its link:
 * the file it leads to is the one replaced.
 */
export const writeCliConfig = async (path: string, cfg: CliConfig): Promise<void> => {
  const body = `${JSON.stringify({ url: cfg.url, token: cfg.token, project: cfg.project }, null, 2)}\n`;
  const [{ mkdir, open, rename, rm }, { randomBytes }] = await Promise.all([import("node:fs/promises"), import("node:crypto")]);
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const target = await writeTarget(path);
  const temp = `${target}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  const handle = await open(temp, "wx", 0o600);
  try {
    await handle.writeFile(body, "utf8");
    await handle.chmod(0o600);
    await handle.sync();
  } catch (err) {
    await handle.close();
    await rm(temp, { force: true });
    throw err;
  }
  await handle.close();
  await rename(temp, target);
};
