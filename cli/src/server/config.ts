import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { z } from "zod";
import {
  FlowError,
  accountProvidersFromEnv,
  parseConnectorBaseUrls,
  parseMasterKey,
  databaseUrlSetting,
  portSetting,
  publicUrlSetting,
  wholeNumberSetting,
  type AccountProvidersConfig,
} from "@flowsvc/core";
import { egressPolicyFromEnv, type EgressPolicy } from "@flowsvc/controller/net/egress-policy";

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace"] as const;

/**
 * `flow server`'s configuration: flags over environment over defaults, parsed once here. A bad
 * value is reported with every problem at once.
 */
const ServerConfigSchema = z.object({
  host: z.string().min(1, "is empty: give an address such as 127.0.0.1 or 0.0.0.0").default("127.0.0.1"),
  port: portSetting(8080),
  // Empty is refused, not resolved: resolve("") is the current directory, which the start would make
  // the data dir (mode 0701, master.key and the Postgres cluster in it).
  dataDir: z.string().min(1, "is empty: give a directory, or leave it unset for the default"),
  agents: wholeNumberSetting({ min: 1, max: 256, fallback: 4, message: "must be a whole number from 1 to 256" }),
  agentPools: z
    .array(
      z
        .string()
        .regex(/^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*:[1-9][0-9]*$/, "takes <capability>[,<capability>...]:<count>, e.g. polyglot:2")
        .transform((v) => {
          const i = v.lastIndexOf(":");
          return { capabilities: v.slice(0, i).split(","), count: Number(v.slice(i + 1)) };
        }),
    )
    .default([]),
  leaseMs: wholeNumberSetting({
    min: 500,
    max: 600_000,
    fallback: 15_000,
    message: "must be a whole number of milliseconds from 500 to 600000",
  }),
  agentMaxJobs: wholeNumberSetting({ min: 1, max: 1_000_000, fallback: 1000, message: "must be a whole number from 1 to 1000000" }),
  agentIdleMs: wholeNumberSetting({
    min: 100,
    max: 86_400_000,
    fallback: 60_000,
    message: "must be a whole number of milliseconds from 100 to 86400000",
  }),
  agentSpawner: z.enum(["on", "off"], { error: 'must be "on" (the default) or "off"' }).default("on"),
  agentUser: z
    .string()
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, "must be a user name (lower-case letters, digits, _ and -, at most 32)")
    .default("flowsvc-agent"),
  logLevel: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(", ")}` }).default("info"),
  databaseUrl: databaseUrlSetting().optional(),
  masterKey: z.string().optional(),
  publicUrl: publicUrlSetting().optional(),
  cliConfigPath: z.string().min(1),
});

/** How a problem names its setting: the flag and the variable a user sets, not the schema's key. */
const SETTING_NAMES: Record<keyof z.input<typeof ServerConfigSchema>, string> = {
  host: "--host / FLOWSVC_HOST",
  port: "--port / FLOWSVC_PORT",
  dataDir: "--data-dir / FLOWSVC_DATA_DIR",
  agents: "--agents / FLOWSVC_AGENTS",
  agentPools: "--agent-pool / FLOWSVC_AGENT_POOLS",
  leaseMs: "--lease-ms / FLOWSVC_AGENT_LEASE_MS",
  agentMaxJobs: "FLOWSVC_AGENT_MAX_JOBS",
  agentIdleMs: "FLOWSVC_AGENT_IDLE_MS",
  agentSpawner: "FLOWSVC_AGENT_SPAWNER",
  agentUser: "FLOWSVC_AGENT_USER",
  logLevel: "--log-level / FLOWSVC_LOG_LEVEL",
  databaseUrl: "FLOWSVC_DATABASE_URL",
  masterKey: "FLOWSVC_MASTER_KEY",
  publicUrl: "FLOWSVC_PUBLIC_URL",
  cliConfigPath: "FLOWSVC_CONFIG",
};

/** `--agent-pool / FLOWSVC_AGENT_POOLS "gpu": takes ...`: the setting's names, the value given when it is one of several, the problem. */
const describeIssue = (issue: z.core.$ZodIssue, input: Record<string, unknown>): string => {
  const key = String(issue.path[0]) as keyof typeof SETTING_NAMES;
  const name = SETTING_NAMES[key] ?? issue.path.join(".");
  const item = issue.path.length > 1 ? (input[key] as unknown[] | undefined)?.[Number(issue.path[1])] : undefined;
  return `${name}${item === undefined ? "" : ` ${JSON.stringify(item)}`} ${issue.message}`;
};

export type ServerConfig = Omit<z.infer<typeof ServerConfigSchema>, "masterKey"> & {
  masterKey: Uint8Array | undefined;
  /** FLOWSVC_CONNECTOR_BASE_URLS: connector provider -> base URL (a test peer); empty: the real APIs. */
  connectorBaseUrls: Record<string, string>;
  /** Connected-account providers and the redirect URI (core's one parser; empty: connecting is not offered). */
  accounts: AccountProvidersConfig;
  /** Where http nodes may connect (FLOWSVC_HTTP_ALLOW_CIDRS, FLOWSVC_HTTP_ALLOW_PRIVATE; local mode: private allowed by default). */
  httpEgress: EgressPolicy;
  agentEnv: Record<string, string | undefined>;
};

export interface ServerFlags {
  host?: string;
  port?: string;
  dataDir?: string;
  agents?: string;
  agentPool?: string[];
  leaseMs?: string;
  logLevel?: string;
}

/**
 * ~/.local/share/flowsvc for a normal user. As root, /var/lib/flowsvc: Postgres then runs as an
 * unprivileged user that must be able to reach its data, and root's home (mode 700) keeps it out.
 */
const defaultDataDir = (env: NodeJS.ProcessEnv): string =>
  process.getuid?.() === 0
    ? "/var/lib/flowsvc"
    : join(env["XDG_DATA_HOME"] || join(env["HOME"] || homedir(), ".local", "share"), "flowsvc");

export const defaultCliConfigPath = (env: NodeJS.ProcessEnv): string =>
  env["FLOWSVC_CONFIG"] || join(env["XDG_CONFIG_HOME"] || join(env["HOME"] || homedir(), ".config"), "flowsvc", "config.json");

/** An environment variable that is set and not empty. */
const envSetting = (env: NodeJS.ProcessEnv, name: string): string | undefined => env[name] || undefined;

/** FLOWSVC_AGENT_POOLS: pools separated by white space. */
const envAgentPools = (env: NodeJS.ProcessEnv): string[] | undefined =>
  envSetting(env, "FLOWSVC_AGENT_POOLS")?.split(/\s+/).filter(Boolean);

/** The data dir as an absolute path; an empty one stays empty, for the schema to refuse. */
const dataDirInput = (given: string | undefined, env: NodeJS.ProcessEnv): string =>
  given === "" ? "" : resolve(given ?? defaultDataDir(env));

/** What the schema parses: each flag over its environment variable; the defaults are the schema's. */
const serverConfigInput = (flags: ServerFlags, env: NodeJS.ProcessEnv): Record<keyof z.input<typeof ServerConfigSchema>, unknown> => ({
  host: flags.host ?? env["FLOWSVC_HOST"],
  port: flags.port ?? env["FLOWSVC_PORT"],
  dataDir: dataDirInput(flags.dataDir ?? env["FLOWSVC_DATA_DIR"], env),
  agents: flags.agents ?? env["FLOWSVC_AGENTS"],
  agentPools: flags.agentPool ?? envAgentPools(env),
  leaseMs: flags.leaseMs ?? env["FLOWSVC_AGENT_LEASE_MS"],
  agentMaxJobs: envSetting(env, "FLOWSVC_AGENT_MAX_JOBS"),
  agentIdleMs: envSetting(env, "FLOWSVC_AGENT_IDLE_MS"),
  agentSpawner: envSetting(env, "FLOWSVC_AGENT_SPAWNER"),
  agentUser: envSetting(env, "FLOWSVC_AGENT_USER"),
  logLevel: flags.logLevel ?? env["FLOWSVC_LOG_LEVEL"],
  databaseUrl: envSetting(env, "FLOWSVC_DATABASE_URL"),
  masterKey: envSetting(env, "FLOWSVC_MASTER_KEY"),
  publicUrl: envSetting(env, "FLOWSVC_PUBLIC_URL"),
  cliConfigPath: defaultCliConfigPath(env),
});

export const loadServerConfig = (flags: ServerFlags, env: NodeJS.ProcessEnv = process.env): ServerConfig => {
  const input = serverConfigInput(flags, env);
  const parsed = ServerConfigSchema.safeParse(input);
  const accounts = accountProvidersFromEnv(
    envSetting(env, "FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS"),
    envSetting(env, "FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI"),
  );
  const egress = egressPolicyFromEnv(
    { allowCidrs: envSetting(env, "FLOWSVC_HTTP_ALLOW_CIDRS"), allowPrivate: envSetting(env, "FLOWSVC_HTTP_ALLOW_PRIVATE") },
    "local",
  );
  if (!parsed.success || !accounts.ok || !egress.ok) {
    const lines = [
      ...(parsed.success ? [] : parsed.error.issues.map((i) => describeIssue(i, input))),
      ...(accounts.ok ? [] : accounts.problems),
      ...(egress.ok ? [] : egress.problems),
    ].map((l) => `  ${l}`);
    throw new FlowError("config", `invalid server configuration:\n${lines.join("\n")}`);
  }
  const c = parsed.data;
  if (c.databaseUrl && !c.masterKey) {
    throw new FlowError("config", "FLOWSVC_DATABASE_URL is set but FLOWSVC_MASTER_KEY is not: a durable deployment needs its master key", {
      hint: "generate one with `openssl rand -base64 32`, keep it safe (losing it loses every sealed value), and set FLOWSVC_MASTER_KEY",
    });
  }
  return {
    ...c,
    masterKey: c.masterKey ? parseMasterKey(c.masterKey) : undefined,
    connectorBaseUrls: parseConnectorBaseUrls(envSetting(env, "FLOWSVC_CONNECTOR_BASE_URLS")),
    accounts: accounts.config,
    httpEgress: egress.policy,
    agentEnv: { ...env },
  };
};
