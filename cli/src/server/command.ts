import { Command } from "commander";
import { FlowError, exitStatusOf } from "@flowsvc/core/errors";
import type { ServerFlags } from "./config.js";

/** `flow server`: the all-in-one local mode (what `npm start` runs). */
export const serverCommand = (): Command =>
  new Command("server")
    .description("run flowsvc on this machine: embedded Postgres, the API, the controller and local agents")
    .option("--host <host>", "address to listen on", undefined)
    .option("--port <port>", "port to listen on (default 8080)")
    .option(
      "--data-dir <dir>",
      "where Postgres data, the master key and agent scratch live (default ~/.local/share/flowsvc; as root /var/lib/flowsvc)",
    )
    .option("--agents <n>", "most jobs at once on the default local agents, which advertise polyglot (default 4)")
    .option(
      "--agent-pool <caps:n>",
      "also run up to n agents that advertise these capabilities, e.g. polyglot:2 (repeatable)",
      (v: string, all: string[] = []) => [...all, v],
    )
    .option("--lease-ms <ms>", "agent heartbeat lease (default 15000)")
    .option("--log-level <level>", "server.log level (default info)")
    .addHelpText(
      "after",
      "\nExamples:\n  flow server\n  flow server --port 9090 --data-dir ./.flowsvc --agents 8\n  flow server --agent-pool gpu:1 --agent-pool gpu,arm64:2\n  FLOWSVC_DATABASE_URL=postgres://... FLOWSVC_MASTER_KEY=... flow server",
    )
    .action(async (flags: ServerFlags) => {
      // Imported here: `flow --help` lists this command without loading the server.
      const [{ loadServerConfig }, { printServerError }, { runServer }] = await Promise.all([
        import("./config.js"),
        import("./print-banner.js"),
        import("./run-server.js"),
      ]);
      let stopping = false;
      try {
        const server = await runServer(loadServerConfig(flags));
        const stop = (signal: string): void => {
          if (stopping) {
            printServerError(`received ${signal} again: stopping Postgres and exiting now`);
            server.stopNow();
            process.exit(130);
          }
          stopping = true;
          process.stderr.write(`\n${signal}: stopping flowsvc...\n`);
          server.stop().then(
            () => process.exit(0),
            () => process.exit(1),
          );
        };
        process.on("SIGINT", () => stop("SIGINT"));
        process.on("SIGTERM", () => stop("SIGTERM"));
      } catch (err) {
        const fe = err instanceof FlowError ? err : new FlowError("internal", (err as Error).message ?? String(err), { cause: err });
        printServerError(fe.message, fe.hint);
        process.exit(exitStatusOf(fe.code));
      }
    });
