/**
 * The deployables' configuration (contract "Deployables and config"): the environment and the
 * optional JSON config file (FLOWSVC_CONFIG_FILE), parsed once with zod. A bad value refuses the start
 * with a message naming the variable or the JSON path; no master key refuses it too. This and
 * ingest/src/config.ts are the only files of the two bins that read process.env.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
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
import { LABEL_KEY, LABEL_VALUE, intIn, matching } from "./config-rules.js";
import { AgentNetworkPolicySpecSchema } from "./agent-network-policy-spec.js";
import { HTTP_ALLOW_CIDRS_VAR, HTTP_ALLOW_PRIVATE_VAR, egressPolicyFromEnv, type EgressPolicy } from "./net/egress-policy.js";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** A capability name, as `--requires` and the agent pools take them. */
const CAPABILITY = /^[A-Za-z0-9_.-]{1,63}$/;
/** A Kubernetes resource quantity (100m, 128Mi, 1, 0.5, 2e3). */
const QUANTITY = /^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const secondsIn = (min: number, max: number) => z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`);

const ResourceList = z.partialRecord(
  z.enum(["cpu", "memory", "ephemeral-storage"]),
  matching(QUANTITY, "a quantity such as 100m or 128Mi"),
);

const Toleration = z.strictObject({
  key: matching(LABEL_KEY, "a taint key").optional(),
  operator: z.enum(["Exists", "Equal"]).optional(),
  value: matching(LABEL_VALUE, "a taint value").optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
  tolerationSeconds: intIn(0, 31_536_000).optional(),
});

const CapabilityScheduling = z.strictObject({
  nodeSelector: z.record(matching(LABEL_KEY, "a label key"), matching(LABEL_VALUE, "a label value")).default({}),
  tolerations: z.array(Toleration).max(32).default([]),
});

const AgentSchema = z
  .strictObject({
    image: z
      .string()
      .min(1)
      .max(512)
      .regex(/^[^\s\0]+$/, "must be an image reference without white space")
      .default("ghcr.io/flowsvc/agent:0.1.0"),
    imagePullPolicy: z.enum(["Always", "IfNotPresent", "Never"]).default("IfNotPresent"),
    resources: z
      .strictObject({ requests: ResourceList.optional(), limits: ResourceList.optional() })
      .default({ requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "1", memory: "512Mi" } }),
    capabilities: z.array(matching(CAPABILITY, "a capability name (letters, digits, _ . -)")).max(64).default(["polyglot"]),
    capabilityScheduling: z.record(matching(CAPABILITY, "a capability name"), CapabilityScheduling).default({}),
    maxPods: intIn(1, 100_000).default(50),
    maxPodsPerProject: intIn(1, 100_000).default(10),
    pendingTimeoutSeconds: secondsIn(0.1, 86_400).default(120),
  })
  .prefault({});

const LeaderElectionSchema = z
  .strictObject({
    enabled: z.boolean().default(true),
    leaseName: matching(DNS_SUBDOMAIN, "a DNS subdomain name (lower case, digits, - and .)").default("flowsvc-controller"),
    leaseDurationSeconds: intIn(1, 3600).default(15),
    renewDeadlineSeconds: secondsIn(0.1, 3600).default(10),
    retryPeriodSeconds: secondsIn(0.05, 3600).default(2),
  })
  .check((ctx) => {
    const l = ctx.value;
    if (l.renewDeadlineSeconds >= l.leaseDurationSeconds)
      ctx.issues.push({
        code: "custom",
        input: l.renewDeadlineSeconds,
        path: ["renewDeadlineSeconds"],
        message: "must be less than leaseDurationSeconds (a leader that cannot renew steps down before its lease can be taken)",
      });
    if (l.retryPeriodSeconds >= l.renewDeadlineSeconds)
      ctx.issues.push({
        code: "custom",
        input: l.retryPeriodSeconds,
        path: ["retryPeriodSeconds"],
        message: "must be less than renewDeadlineSeconds",
      });
  })
  .prefault({});

/**
 * The bootstrap `admin` user (initial-admin.ts): made at the controller's first start, its token
 * put in this Secret of the controller's own namespace. Absent or disabled: no admin is made.
 */
const InitialAdminSchema = z.strictObject({
  enabled: z.boolean().default(true),
  secretName: matching(DNS_SUBDOMAIN, "a Secret name (a DNS subdomain: lower case, digits, - and .)"),
  labels: z.record(matching(LABEL_KEY, "a label key"), matching(LABEL_VALUE, "a label value")).default({}),
});

/** The config file (FLOWSVC_CONFIG_FILE, JSON): every field optional, with the contract's defaults. */
export const ConfigFileSchema = z.strictObject({
  watchNamespaces: z.array(matching(DNS_LABEL, "a namespace name (a DNS label)")).max(1000).default([]),
  agentServerUrl: z
    .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
    .max(2048)
    .default("http://flowsvc-ingest:8080"),
  agent: AgentSchema,
  runTtlSecondsAfterFinished: intIn(0, 31_536_000).default(3600),
  leaderElection: LeaderElectionSchema,
  /**
   * The spec of the NetworkPolicy the controller keeps in each namespace it launches agent Pods in
   * (kube/agent-network-policies.ts); absent: none is read or written.
   */
  agentNetworkPolicy: AgentNetworkPolicySpecSchema.optional(),
  initialAdmin: InitialAdminSchema.optional(),
});
export type ConfigFile = z.infer<typeof ConfigFileSchema>;
export type AgentPodSettings = ConfigFile["agent"];
export type LeaderElectionSettings = ConfigFile["leaderElection"];
export type InitialAdminSettings = NonNullable<ConfigFile["initialAdmin"]>;

const CommonEnvSchema = z.object({
  FLOWSVC_DATABASE_URL: databaseUrlSetting(),
  FLOWSVC_MASTER_KEY: z.string({ error: "is required (base64 of 32 bytes; without it no sealed value can be read)" }).min(1, "is required"),
  FLOWSVC_LOG_LEVEL: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(", ")}` }).default("info"),
  FLOWSVC_PUBLIC_URL: publicUrlSetting().optional(),
  FLOWSVC_CONFIG_FILE: z.string().min(1).optional(),
  /** How long an agent's job lease lasts without a heartbeat; ingest and the controller must agree (as `flow server`'s). */
  FLOWSVC_AGENT_LEASE_MS: wholeNumberSetting({
    min: 500,
    max: 600_000,
    fallback: 15_000,
    message: "must be a whole number of milliseconds from 500 to 600000",
  }),
});

/** What both bins share. */
export interface ServiceConfig {
  databaseUrl: string;
  masterKey: Uint8Array;
  logLevel: LogLevel;
  publicUrl: string | undefined;
  leaseMs: number;
  file: ConfigFile;
  /** FLOWSVC_CONNECTOR_BASE_URLS: connector provider -> base URL; empty: the real APIs. */
  connectorBaseUrls: Record<string, string>;
  /** Connected-account providers and the redirect URI (core's one parser; empty: connecting is not offered). */
  accounts: AccountProvidersConfig;
}

export interface ControllerConfig extends ServiceConfig {
  /** The lease identity (FLOWSVC_POD_NAME, else the host name). */
  podName: string;
  /** Where the Lease lives (FLOWSVC_POD_NAMESPACE, else the service account's namespace, else default). */
  podNamespace: string;
  healthHost: string;
  healthPort: number;
  /** Where http nodes may connect (FLOWSVC_HTTP_ALLOW_CIDRS, FLOWSVC_HTTP_ALLOW_PRIVATE; Kubernetes mode: private refused by default). */
  httpEgress: EgressPolicy;
}

/** A JSON path, `a.b.0.c`; a key with anything but printable ASCII is quoted (a NUL or a control character is never printed). */
const pathOf = (path: readonly PropertyKey[]): string =>
  path.map((k) => (typeof k === "string" && !/^[\x21-\x7e]*$/.test(k) ? JSON.stringify(k) : String(k))).join(".");

/** A refusal naming every problem, one a line. */
const refuse = (what: string, problems: string[]): FlowError =>
  new FlowError("config", `invalid ${what}:\n${problems.map((p) => `  ${p}`).join("\n")}`, { details: { problems } });

/** Empty variables count as unset (a chart that renders `value: ""`). */
const envInput = (env: NodeJS.ProcessEnv, names: readonly string[]): Record<string, string | undefined> =>
  Object.fromEntries(names.map((n) => [n, env[n] === "" ? undefined : env[n]]));

/** Reads and parses the config file; problems name the file and the JSON path. */
const readConfigFile = (path: string | undefined): ConfigFile => {
  if (path === undefined) return ConfigFileSchema.parse({});
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    const why =
      err instanceof SyntaxError ? `not JSON (${err.message})` : `cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`;
    throw refuse("configuration", [`FLOWSVC_CONFIG_FILE (${path}): ${why}`]);
  }
  const parsed = ConfigFileSchema.safeParse(raw);
  if (!parsed.success)
    throw refuse(
      `config file ${path}`,
      parsed.error.issues.map((i) => `${pathOf(i.path) || "(the document)"}: ${i.message}`),
    );
  return parsed.data;
};

/** The master key, or undefined with why it is not one added to `problems` (unset is zod's problem). */
const masterKeyOf = (key: string | undefined, problems: string[]): Uint8Array | undefined => {
  if (!key) return undefined;
  try {
    return parseMasterKey(key);
  } catch (err) {
    // The value is never echoed: only why it is not a key.
    problems.push(`FLOWSVC_MASTER_KEY: ${err instanceof FlowError ? err.message : "is not a master key"}`);
    return undefined;
  }
};

/**
 * Parses what both bins read; `extra` are the bin's own variables, checked in the same pass, and
 * `extraProblems` the problems the bin found in its other settings (refused with these, at once).
 */
export const parseServiceConfig = <T extends z.ZodRawShape>(
  env: NodeJS.ProcessEnv,
  extra: T,
  extraProblems: readonly string[] = [],
): ServiceConfig & { env: z.infer<z.ZodObject<T>> } => {
  const schema = CommonEnvSchema.extend(extra);
  const parsed = schema.safeParse(envInput(env, Object.keys(schema.shape)));
  const problems = parsed.success ? [] : parsed.error.issues.map((i) => `${pathOf(i.path)}: ${i.message}`);
  const masterKey = masterKeyOf(env["FLOWSVC_MASTER_KEY"], problems);
  const accounts = accountProvidersFromEnv(
    env["FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS"] || undefined,
    env["FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI"] || undefined,
  );
  if (!accounts.ok) problems.push(...accounts.problems);
  problems.push(...extraProblems);
  if (!parsed.success || !masterKey || !accounts.ok || extraProblems.length > 0) throw refuse("configuration", problems);
  const e = parsed.data as z.infer<typeof CommonEnvSchema> & z.infer<z.ZodObject<T>>;
  return {
    databaseUrl: e.FLOWSVC_DATABASE_URL,
    masterKey,
    logLevel: e.FLOWSVC_LOG_LEVEL,
    publicUrl: e.FLOWSVC_PUBLIC_URL,
    leaseMs: e.FLOWSVC_AGENT_LEASE_MS,
    file: readConfigFile(e.FLOWSVC_CONFIG_FILE),
    connectorBaseUrls: parseConnectorBaseUrls(env["FLOWSVC_CONNECTOR_BASE_URLS"]),
    accounts: accounts.config,
    env: e,
  };
};

const SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

const serviceAccountNamespace = (): string | undefined => {
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
};

/** The controller's configuration (flowsvc-controller). */
export const loadControllerConfig = (env: NodeJS.ProcessEnv = process.env): ControllerConfig => {
  const egress = egressPolicyFromEnv(
    { allowCidrs: env[HTTP_ALLOW_CIDRS_VAR] || undefined, allowPrivate: env[HTTP_ALLOW_PRIVATE_VAR] || undefined },
    "kubernetes",
  );
  const c = parseServiceConfig(
    env,
    {
      FLOWSVC_POD_NAME: z
        .string()
        .max(253)
        .regex(/^[^\s\0]+$/, "must be a name without white space")
        .optional(),
      FLOWSVC_POD_NAMESPACE: matching(DNS_LABEL, "a namespace name (a DNS label)").optional(),
      FLOWSVC_HEALTH_HOST: z.string().min(1).default("0.0.0.0"),
      FLOWSVC_HEALTH_PORT: portSetting(8081),
    },
    egress.ok ? [] : egress.problems,
  );
  const { env: e, ...service } = c;
  if (!egress.ok) throw refuse("configuration", egress.problems); // parseServiceConfig already refused these
  return {
    ...service,
    podName: e.FLOWSVC_POD_NAME ?? hostname(),
    podNamespace: e.FLOWSVC_POD_NAMESPACE ?? serviceAccountNamespace() ?? "default",
    healthHost: e.FLOWSVC_HEALTH_HOST,
    healthPort: e.FLOWSVC_HEALTH_PORT,
    httpEgress: egress.policy,
  };
};
