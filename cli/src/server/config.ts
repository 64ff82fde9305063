import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { z } from "zod";
import {
  FlowError,
  accountProvidersFromEnv,
  parseConnectorBaseUrls,
  parseMasterKey,
  portSetting,
  type AccountProvidersConfig,
} from "@flowsvc/core";
import { egressPolicyFromEnv, type EgressPolicy } from "@flowsvc/controller/net/egress-policy";

/**
 * `flow server`'s configuration: flags over environment over defaults, parsed once here. A bad
 * value is reported with every problem at once.
 */
const ServerConfigSchema = z.object({
  host: z.string().min(1).default("127.0.0.1"),
  port: portSetting(8080),
  // Empty is refused, not resolved: resolve("") is the current directory, which the start would make
  // the data dir (mode 0701, master.key and the Postgres cluster in it).
  dataDir: z.string().min(1, "--data-dir / FLOWSVC_DATA_DIR is empty: give a directory, or leave it unset for the default"),
  agents: z.coerce.number().int().min(1).max(256).default(4),
  agentPools: z
    .array(
      z
        .string()
        .regex(
          /^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*:[1-9][0-9]*$/,
          "an agent pool is <capability>[,<capability>...]:<count>, e.g. polyglot:2",
        )
        .transform((v) => {
          const i = v.lastIndexOf(":");
          return { capabilities: v.slice(0, i).split(","), count: Number(v.slice(i + 1)) };
        }),
    )
    .default([]),
  leaseMs: z.coerce.number().int().min(500).max(600_000).default(15_000),
  agentMaxJobs: z.coerce
    .number({ error: "FLOWSVC_AGENT_MAX_JOBS must be a whole number from 1 to 1000000" })
    .int()
    .min(1)
    .max(1_000_000)
    .default(1000),
  agentIdleMs: z.coerce
    .number({ error: "FLOWSVC_AGENT_IDLE_MS must be a whole number of milliseconds from 100 to 86400000" })
    .int()
    .min(100)
    .max(86_400_000)
    .default(60_000),
  agentSpawner: z.enum(["on", "off"], { error: 'FLOWSVC_AGENT_SPAWNER must be "on" (the default) or "off"' }).default("on"),
  agentUser: z
    .string()
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, "FLOWSVC_AGENT_USER must be a user name (lower-case letters, digits, _ and -, at most 32)")
    .default("flowsvc-agent"),
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace"]).default("info"),
  databaseUrl: z.string().url({ error: "FLOWSVC_DATABASE_URL must be a postgres:// URL" }).optional(),
  masterKey: z.string().optional(),
  publicUrl: z.string().url({ error: "FLOWSVC_PUBLIC_URL must be a URL" }).optional(),
  cliConfigPath: z.string().min(1),
});
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
  const parsed = ServerConfigSchema.safeParse(serverConfigInput(flags, env));
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
      ...(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`)),
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
