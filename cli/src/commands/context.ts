/**
 * What a command action gets: the resolved settings, an API client for them and the project-scoped
 * path prefix. `withSettings` opens it from the invocation's global flags and closes the client afterwards.
 */
import type { Command } from "commander";
import { looseModeWarning, readSavedCliConfig, resolveCliConfigPath } from "../cli-config.js";
import { parseCliEnv, resolveSettings } from "../config.js";
import type { Environment, SettingFlags, Settings } from "../config.js";
import { createApiClient } from "../http.js";
import type { ApiClient } from "../http.js";
import type { Stdio } from "../print.js";
import { printable } from "../print-format.js";

/** What bin/flow.ts hands the user CLI. */
export interface CliDeps {
  env: Environment;
  io: Stdio;
  now: () => Date;
}

/** CliDeps plus the way an action reports a non-zero exit that is not an error (a failed run). */
export interface CommandDeps extends CliDeps {
  setExitCode(code: number): void;
}

export interface CommandContext {
  io: Stdio;
  now: Date;
  settings: Settings;
  configPath: string;
  api: ApiClient;
  /** `/api/v1/orgs/{org}/projects/{project}` */
  scoped: string;
}

export const scopedPrefix = (org: string, project: string): string =>
  `/api/v1/orgs/${encodeURIComponent(org)}/projects/${encodeURIComponent(project)}`;

/** `{scoped}/runs/{id}` and the like, each segment encoded. */
export const scopedPath = (ctx: CommandContext, ...segments: string[]): string =>
  [ctx.scoped, ...segments.map((s) => encodeURIComponent(s))].join("/");

export const flagsOf = (cmd: Command): SettingFlags => {
  const { url, token, project } = cmd.optsWithGlobals<SettingFlags>();
  return { url, token, project };
};

/**
 * Parses the environment, reads the saved config and applies the precedence for this command. When
 * the token it uses comes from the file and the file's group or others may access it, one warning
 * line goes to stderr and the command goes on (a token from --token or FLOWSVC_TOKEN: no warning).
 */
export const loadSettings = async (deps: CliDeps, flags: SettingFlags): Promise<{ settings: Settings; configPath: string }> => {
  const env = await parseCliEnv(deps.env);
  const configPath = resolveCliConfigPath(env);
  const saved = await readSavedCliConfig(configPath);
  const settings = resolveSettings(flags, env, saved?.config);
  const warning =
    saved && settings.sources.token === "file" && settings.token !== "" ? looseModeWarning(configPath, saved.mode) : undefined;
  // One line, and a path from FLOWSVC_CONFIG cannot drive the terminal: controls and line breaks as escapes.
  if (warning) deps.io.note(printable(warning).replaceAll("\n", "\\x0a"));
  return { settings, configPath };
};

/** Runs `fn` with an API client for the settings that `flags` (a command's global flags) resolve to, and closes it. */
export const withSettings = async <T>(deps: CliDeps, flags: SettingFlags, fn: (ctx: CommandContext) => Promise<T>): Promise<T> => {
  const { settings, configPath } = await loadSettings(deps, flags);
  const api = createApiClient({ url: settings.url, token: settings.token });
  try {
    return await fn({ io: deps.io, now: deps.now(), settings, configPath, api, scoped: scopedPrefix(settings.org, settings.project) });
  } finally {
    await api.close();
  }
};
