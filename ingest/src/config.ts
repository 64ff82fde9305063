/**
 * flowsvc-ingest's configuration (contract "Deployables and config"): what both bins share
 * (@flowsvc/controller's parseServiceConfig: database, master key, log level, public URL, config
 * file, agent lease) and FLOWSVC_HOST / FLOWSVC_PORT, parsed once. A bad value refuses the start with
 * a message naming the variable. The only file of this bin that reads process.env.
 */
import { z } from "zod";
import { parseServiceConfig, type ServiceConfig } from "@flowsvc/controller";

export interface IngestConfig extends ServiceConfig {
  host: string;
  port: number;
}

export const loadIngestConfig = (env: NodeJS.ProcessEnv = process.env): IngestConfig => {
  const { env: e, ...service } = parseServiceConfig(env, {
    FLOWSVC_HOST: z.string().min(1).max(253).default("0.0.0.0"),
    FLOWSVC_PORT: z.coerce.number().int("must be a port number").min(0).max(65535).default(8080),
  });
  return { ...service, host: e.FLOWSVC_HOST, port: e.FLOWSVC_PORT };
};
