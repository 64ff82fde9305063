/**
 * `flow login`: checks a token against the server (GET /api/v1/whoami) and saves url, token and
 * project to the CLI config file (0600), so later commands need no flags.
 */
import { FlowError } from "@flowsvc/core/errors";
import { writeCliConfig } from "../cli-config.js";
import { DEFAULT_PROJECT } from "../config.js";
import type { Settings } from "../config.js";
import { createApiClient } from "../http.js";
import { loadSettings } from "./context.js";
import type { CommandSpec } from "./spec.js";

export interface WhoAmI {
  user: string | { id?: string; name?: string };
  projects?: Array<{ org: string; project: string; role: string }>;
}

export const userName = (who: WhoAmI): string => (typeof who.user === "string" ? who.user : (who.user.name ?? who.user.id ?? "?"));

/** The project to save: an explicit one, else the saved one, else default/default when the user has it, else the user's first. */
export const chooseProject = (settings: Settings, who: WhoAmI): string => {
  const current = `${settings.org}/${settings.project}`;
  if (settings.sources.project !== "default") return current;
  const refs = (who.projects ?? []).map((p) => `${p.org}/${p.project}`);
  return refs.includes(DEFAULT_PROJECT) || refs.length === 0 ? DEFAULT_PROJECT : (refs[0] ?? DEFAULT_PROJECT);
};

export const loginSpec: CommandSpec = {
  name: "login",
  description: "check a token against the server and save url, token and project for later commands",
  helpBefore: "\nUses the global --url, --token and --project (or FLOWSVC_URL, FLOWSVC_TOKEN, FLOWSVC_PROJECT).\n",
  examples: [
    'flow login --url http://127.0.0.1:8080 --token "$TOKEN"',
    'flow login --url https://flow.example.com --token "$TOKEN" --project acme/web',
  ],
  action: async (deps, { flags }) => {
    const { settings, configPath } = await loadSettings(deps, flags);
    if (!settings.token) {
      throw new FlowError("invalid_argument", "flow login needs a token", {
        hint: "pass --token <token> (the token `flow server` printed at first start) or set FLOWSVC_TOKEN",
      });
    }
    const api = createApiClient({ url: settings.url, token: settings.token });
    let who: WhoAmI;
    try {
      who = await api.call<WhoAmI>("GET", "/api/v1/whoami");
    } finally {
      await api.close();
    }
    const project = chooseProject(settings, who);
    await writeCliConfig(configPath, { url: settings.url, token: settings.token, project });
    const role = who.projects?.find((p) => `${p.org}/${p.project}` === project)?.role;
    deps.io.out(`logged in to ${settings.url} as ${userName(who)}; project ${project}${role ? ` (${role})` : ""}`);
    if (!role && who.projects) deps.io.note(`warning: ${userName(who)} is not a member of ${project}; pass --project org/project`);
    deps.io.note(`saved to ${configPath}`);
  },
};
