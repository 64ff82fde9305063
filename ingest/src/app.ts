import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { IngestDeps } from "./deps.js";
import { errorHandler, notFoundHandler } from "./errors.js";
import { agentRoutes } from "./routes/agent.js";
import { agentCallRoutes } from "./routes/agent-calls.js";
import { emitRoutes } from "./routes/emit.js";
import { eventRoutes } from "./routes/events.js";
import { handlerRoutes } from "./routes/handlers.js";
import { hookRoutes } from "./routes/hooks.js";
import { runRoutes } from "./routes/runs.js";
import { secretRoutes } from "./routes/secrets.js";
import { signalRoutes } from "./routes/signals.js";
import { whoamiRoutes } from "./routes/whoami.js";

/** The HTTP surface: the user API (/api/v1), the agent API (/agent/v1) and health. */
export const buildApp = (deps: IngestDeps, logger: FastifyBaseLogger): FastifyInstance => {
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: 1024 * 1024,
    // Agents post logs every 50 ms: per-request lines would drown the log. Errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    // A shutdown must not wait for `flow follow` streams of runs that are still going.
    forceCloseConnections: true,
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  whoamiRoutes(app, deps);
  runRoutes(app, deps);
  secretRoutes(app, deps);
  signalRoutes(app, deps);
  eventRoutes(app, deps);
  emitRoutes(app, deps);
  handlerRoutes(app, deps);
  hookRoutes(app, deps);
  agentRoutes(app, deps);
  agentCallRoutes(app, deps);
  return app;
};
