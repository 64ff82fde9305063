import { Command } from "commander";

/** `flow server`: the all-in-one local mode. Wired in cli/src/server/run-server.ts. */
export const serverCommand = (): Command =>
  new Command("server").description("run flowsvc locally: embedded Postgres, API, controller and agents");
