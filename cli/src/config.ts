/**
 * The user CLI's configuration, and the one file of the CLI that reads `process.env`.
 *
 * Precedence, highest first: flags (`--url`, `--token`, `--project`), the environment
 * (FLOWSVC_URL, FLOWSVC_TOKEN, FLOWSVC_PROJECT), the saved config file (written by `flow login` and
 * by `flow server` at first start), then the defaults below.
 *
 * No zod and no static import of core here: bin/flow.ts imports this file on the in-script fast
 * path (every durable call of a script, on every replay), and every user command reads it before
 * its first request; the few checks below are plain code, and core's errors load only to report one.
 */
import type { CliConfig } from "./cli-config.js";

export type Environment = Readonly<Record<string, string | undefined>>;

export const DEFAULT_URL = "http://127.0.0.1:8080";
export const DEFAULT_PROJECT = "default/default";

/** `org/project`: two non-empty segments without spaces or further slashes. */
export const PROJECT_REF_PATTERN = /^[^/\s]+\/[^/\s]+$/;

/** The process environment, read once by bin/flow.ts and passed down from there. */
export const processEnvironment = (): Environment => process.env;

/** The variables the user CLI reads, blanks treated as unset. */
export interface CliEnv {
  FLOWSVC_URL?: string;
  FLOWSVC_TOKEN?: string;
  FLOWSVC_PROJECT?: string;
  FLOWSVC_CONFIG?: string;
  XDG_CONFIG_HOME?: string;
  HOME?: string;
}

/**
 * Why `text` is not the server's base URL, or undefined when it is one: http(s), no user name or
 * password (the token goes in --token / FLOWSVC_TOKEN; a password in the URL would be echoed and
 * saved), no query or fragment, and not the API's own path (commands append /api/v1 themselves).
 * The one rule for --url, FLOWSVC_URL and the saved config's url.
 */
export const httpUrlProblem = (text: string): string | undefined => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "must be an http:// or https:// URL such as http://127.0.0.1:8080";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "must be an http:// or https:// URL such as http://127.0.0.1:8080";
  if (url.username !== "" || url.password !== "") return "must not carry a user name or password (give the API token with --token)";
  if (url.search !== "" || url.hash !== "") return "must not carry a query or fragment: give the server's base URL";
  if (/\/api\/v1\/*$/.test(url.pathname)) return "is the server's base URL, without /api/v1 (commands add it)";
  return undefined;
};

/** One problem with a value, as core's describeIssues prints it (`NAME: message`). */
export interface Issue {
  path: string[];
  message: string;
}

const CLI_ENV_NAMES = ["FLOWSVC_URL", "FLOWSVC_TOKEN", "FLOWSVC_PROJECT", "FLOWSVC_CONFIG", "XDG_CONFIG_HOME", "HOME"] as const;

/** The check of each variable that has one: a problem message, or undefined. */
const ENV_CHECKS: Partial<Record<keyof CliEnv, (value: string) => string | undefined>> = {
  FLOWSVC_URL: httpUrlProblem,
  FLOWSVC_PROJECT: (value) => (PROJECT_REF_PATTERN.test(value) ? undefined : "must be org/project"),
};

/** Values that are trimmed before use (a token or project pasted with a stray space). */
const TRIMMED: ReadonlySet<string> = new Set(["FLOWSVC_TOKEN", "FLOWSVC_PROJECT"]);

/** Parses the environment once; a bad value is a `config` error (exit 2) naming the variable. */
export const parseCliEnv = async (env: Environment): Promise<CliEnv> => {
  const parsed: CliEnv = {};
  const issues: Issue[] = [];
  for (const name of CLI_ENV_NAMES) {
    const raw = env[name];
    if (raw === undefined || raw.trim() === "") continue;
    const value = TRIMMED.has(name) ? raw.trim() : raw;
    const problem = ENV_CHECKS[name]?.(value);
    if (problem === undefined) parsed[name] = value;
    else issues.push({ path: [name], message: problem });
  }
  if (issues.length > 0) {
    const { FlowError, describeIssues } = await import("@flowsvc/core/errors");
    throw new FlowError("config", `bad environment: ${describeIssues(issues)}`, { hint: "fix or unset the variable named above" });
  }
  return parsed;
};

export interface SettingFlags {
  url?: string;
  token?: string;
  project?: string;
}

export type SettingSource = "flag" | "env" | "file" | "default";

/** What a command talks to, after precedence. */
export interface Settings {
  url: string;
  token: string;
  org: string;
  project: string;
  sources: { url: SettingSource; token: SettingSource; project: SettingSource };
}

const pick = <T>(candidates: ReadonlyArray<readonly [T | undefined, SettingSource]>, fallback: T): [T, SettingSource] => {
  for (const [value, source] of candidates) if (value !== undefined) return [value, source];
  return [fallback, "default"];
};

/** Applies the precedence; inputs are already validated (flags by their parsers, env by parseCliEnv, file by cli-config). */
export const resolveSettings = (flags: SettingFlags, env: CliEnv, saved: CliConfig | undefined): Settings => {
  const [url, urlFrom] = pick(
    [
      [flags.url, "flag"],
      [env.FLOWSVC_URL, "env"],
      [saved?.url, "file"],
    ],
    DEFAULT_URL,
  );
  const [token, tokenFrom] = pick(
    [
      [flags.token, "flag"],
      [env.FLOWSVC_TOKEN, "env"],
      [saved?.token, "file"],
    ],
    "",
  );
  const [ref, projectFrom] = pick(
    [
      [flags.project, "flag"],
      [env.FLOWSVC_PROJECT, "env"],
      [saved?.project, "file"],
    ],
    DEFAULT_PROJECT,
  );
  const [org = "", project = ""] = ref.split("/");
  return { url: url.replace(/\/+$/, ""), token, org, project, sources: { url: urlFrom, token: tokenFrom, project: projectFrom } };
};
