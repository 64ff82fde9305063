/**
 * flowsvc-ingest's configuration (contract "Deployables and config"): what both bins share
 * (@flowsvc/controller's parseServiceConfig: database, master key, log level, public URL, config
 * file, agent lease), FLOWSVC_HOST / FLOWSVC_PORT (the app: user API, hooks, agent API, probes) and
 * FLOWSVC_METRICS_PORT (`/metrics`, on the same host, a port no Ingress routes to), parsed once. A
 * bad value refuses the start with a message naming the variable. The only file of this bin that
 * reads process.env.
 */
import { z } from "zod";
import { portSetting } from "@flowsvc/core";
import { parseServiceConfig, type ServiceConfig } from "@flowsvc/controller";

export interface IngestConfig extends ServiceConfig {
  host: string;
  port: number;
  /** Where `/metrics` (and /healthz, /readyz) is served; the app's port does not answer /metrics. */
  metricsPort: number;
}

const PORTS = { FLOWSVC_PORT: portSetting(8080), FLOWSVC_METRICS_PORT: portSetting(9090) };

/** The app and /metrics on one port cannot both listen: refused with the other problems (0, a free port each, may repeat). */
const portClash = (env: NodeJS.ProcessEnv): string[] => {
  const app = PORTS.FLOWSVC_PORT.safeParse(env["FLOWSVC_PORT"] || undefined);
  const metrics = PORTS.FLOWSVC_METRICS_PORT.safeParse(env["FLOWSVC_METRICS_PORT"] || undefined);
  if (!app.success || !metrics.success || metrics.data === 0 || metrics.data !== app.data) return [];
  return [`FLOWSVC_METRICS_PORT: must differ from FLOWSVC_PORT (both ${app.data}): /metrics has a port of its own`];
};

export const loadIngestConfig = (env: NodeJS.ProcessEnv = process.env): IngestConfig => {
  const { env: e, ...service } = parseServiceConfig(
    env,
    { FLOWSVC_HOST: z.string().min(1).max(253).default("0.0.0.0"), ...PORTS },
    portClash(env),
  );
  return { ...service, host: e.FLOWSVC_HOST, port: e.FLOWSVC_PORT, metricsPort: e.FLOWSVC_METRICS_PORT };
};
