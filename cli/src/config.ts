/**
 * The user CLI's configuration, and the one file of the CLI that reads `process.env`.
 *
 * Precedence, highest first: flags (`--url`, `--token`, `--project`), the environment
 * (FLOWSVC_URL, FLOWSVC_TOKEN, FLOWSVC_PROJECT), the saved config file (written by `flow login` and
 * by `flow server` at first start), then the defaults below.
 *
 * zod and core are imported lazily, inside `parseCliEnv`: bin/flow.ts imports this file on the
 * in-script fast path (every durable call of a script, on every replay), where zod's ~60 ms
 * import would double the cost of a call.
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

/** Parses the environment once; a bad value is a `config` error (exit 2) naming the variable. */
export const parseCliEnv = async (env: Environment): Promise<CliEnv> => {
  const [{ z }, { FlowError, describeIssues }] = await Promise.all([import("zod"), import("@flowsvc/core")]);
  const unsetIfBlank = (v: unknown): unknown => (typeof v === "string" && v.trim() === "" ? undefined : v);
  const schema = z.object({
    FLOWSVC_URL: z.preprocess(unsetIfBlank, z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" }).optional()),
    FLOWSVC_TOKEN: z.preprocess(unsetIfBlank, z.string().trim().optional()),
    FLOWSVC_PROJECT: z.preprocess(unsetIfBlank, z.string().trim().regex(PROJECT_REF_PATTERN, "must be org/project").optional()),
    FLOWSVC_CONFIG: z.preprocess(unsetIfBlank, z.string().optional()),
    XDG_CONFIG_HOME: z.preprocess(unsetIfBlank, z.string().optional()),
    HOME: z.preprocess(unsetIfBlank, z.string().optional()),
  });
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new FlowError("config", `bad environment: ${describeIssues(parsed.error.issues)}`, {
      hint: "fix or unset the variable named above",
    });
  }
  return parsed.data;
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

/** Applies the precedence; inputs are already validated (flags by their parsers, env by zod, file by cli-config). */
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
