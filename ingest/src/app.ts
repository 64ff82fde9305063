import { createServer, type RequestListener, type Server } from "node:http";
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { FlowError, REQUEST_ID_HEADER, pathParamProblem, queryProblem, saneRequestId } from "@flowsvc/core";
import { ServiceMetrics, mintId } from "@flowsvc/store";
import type { IngestDeps, RouteDeps } from "./deps.js";
import { createRunMaskers } from "./run-masker.js";
import { LogLineIndexes } from "./log-lines.js";
import { metricsRoute, observe } from "./observability.js";
import { HookFront } from "./hook-front.js";
import { JournalFront } from "./journal-front.js";
import { storableJsonParser } from "./front-io.js";
import { catalogRoutes } from "./openapi/document.js";
import { openApiRoutes } from "./openapi/routes.js";
import { clientErrorHandler, errorHandler, notFoundHandler } from "./errors.js";
import { agentRoutes } from "./routes/agent.js";
import { agentCallRoutes } from "./routes/agent-calls.js";
import { agentListRoutes } from "./routes/agents.js";
import { approvalRoutes } from "./routes/approvals.js";
import { credentialRoutes } from "./routes/credentials.js";
import { accountRoutes } from "./routes/accounts.js";
import { memberRoutes } from "./routes/members.js";
import { userRoutes } from "./routes/users.js";
import { tokenRoutes } from "./routes/tokens.js";
import { emitRoutes } from "./routes/emit.js";
import { eventRoutes } from "./routes/events.js";
import { graphEndpointRoutes } from "./routes/graph-endpoints.js";
import { graphRoutes } from "./routes/graphs.js";
import { handlerRoutes } from "./routes/handlers.js";
import { hookRoutes } from "./routes/hooks.js";
import { runRoutes } from "./routes/runs.js";
import { scheduleRoutes } from "./routes/schedules.js";
import { secretRoutes } from "./routes/secrets.js";
import { signalRoutes } from "./routes/signals.js";
import { whoamiRoutes } from "./routes/whoami.js";
import { consoleRoutes } from "./console/routes.js";

/**
 * Input Postgres cannot store is refused before any route runs: every JSON body is parsed and then
 * checked (NUL, lone surrogates, nesting; core's findJsonProblem) by the one application/json
 * parser, and path parameters and the query string by one onRequest hook. Hook ingest keeps raw
 * bytes and checks its body itself, after the signature.
 */
const guardInput = (app: FastifyInstance): void => {
  const parseJson = storableJsonParser(app);
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
    let value: unknown;
    try {
      value = parseJson(body as string, req);
    } catch (e) {
      return done(e as Error, undefined);
    }
    done(null, value);
  });
  app.addHook("onRequest", (req, _reply, done) => {
    const qs = req.url.indexOf("?");
    const problem =
      pathParamProblem((req.params ?? {}) as Record<string, unknown>) ?? (qs < 0 ? undefined : queryProblem(req.url.slice(qs + 1)));
    done(problem ? new FlowError("invalid_argument", problem) : undefined);
  });
};

/** Fastify's server options that its own node:http server would have taken (its defaults: fastify/lib/server.js). */
interface ServerOptions {
  keepAliveTimeout: number;
  requestTimeout: number;
  connectionTimeout: number;
  maxRequestsPerSocket: number;
}

/** The requests served in front of Fastify: plain hook deliveries (hook-front.ts) and step records (journal-front.ts). */
interface Fronts {
  readonly hook: HookFront;
  readonly journal: JournalFront;
}

/**
 * The node:http server Fastify would make (same settings), whose request listener lets the fronts
 * take plain hook deliveries and step records and hands every other request to Fastify.
 */
const serverWithFront = (fronts: Fronts, fastify: RequestListener, opts: ServerOptions): Server => {
  const { hook, journal } = fronts;
  const server = createServer((req, res) => {
    if (!journal.take(req, res) && !hook.take(req, res)) fastify(req, res);
  });
  server.keepAliveTimeout = opts.keepAliveTimeout;
  server.requestTimeout = opts.requestTimeout;
  server.setTimeout(opts.connectionTimeout);
  if (opts.maxRequestsPerSocket > 0) server.maxRequestsPerSocket = opts.maxRequestsPerSocket;
  return server;
};

const fronts = new WeakMap<FastifyInstance, Fronts>();

/** The app's hook front (hook-front.ts): which deliveries from a socket it served. */
export const hookFrontOf = (app: FastifyInstance): HookFront | undefined => fronts.get(app)?.hook;

/** The app's journal front (journal-front.ts): which step records from a socket it served. */
export const journalFrontOf = (app: FastifyInstance): JournalFront | undefined => fronts.get(app)?.journal;

/** The HTTP surface: the user API (/api/v1), the agent API (/agent/v1), health and (unless deps.metricsRoute is false) /metrics. */
export const buildApp = (deps: IngestDeps, logger: FastifyBaseLogger): FastifyInstance => {
  const hookFront = new HookFront();
  const journalFront = new JournalFront();
  const app = Fastify({
    serverFactory: (handler, opts) =>
      serverWithFront({ hook: hookFront, journal: journalFront }, handler, opts as unknown as ServerOptions),
    loggerInstance: logger,
    bodyLimit: 1024 * 1024,
    // Agents post logs every 50 ms: per-request lines would drown the log. Errors are still logged.
    // Every line of a request carries its id as `requestId` (see genReqId below).
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: "requestId" }),
    // A shutdown must not wait for `flow follow` streams of runs that are still going.
    forceCloseConnections: true,
    // The router's and Node's own refusals (bad percent-encoding, an overlong segment, oversized
    // headers) answer in the same error shape as every other error.
    frameworkErrors: (err, req, reply) => errorHandler(err, req, reply),
    clientErrorHandler,
    // A request id per request, on every log line of it (`requestId`) and in X-Request-Id (core/src/request-id.ts).
    genReqId: (req) => saneRequestId(req.headers[REQUEST_ID_HEADER]) ?? mintId("req"),
  });
  app.addHook("onSend", (req, reply, _payload, done) => {
    void reply.header(REQUEST_ID_HEADER, req.id);
    done();
  });
  // A closing app answers every request itself (Fastify's 503), hook deliveries and step records included.
  app.addHook("preClose", (done) => {
    hookFront.close();
    journalFront.close();
    done();
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  guardInput(app);
  // Every route registered from here on, for the OpenAPI document (openapi/document.ts).
  fronts.set(app, { hook: hookFront, journal: journalFront });
  const routes = catalogRoutes(app);
  const metrics = deps.metrics ?? new ServiceMetrics({ pool: deps.pool });
  observe(app, metrics);
  if (deps.metricsRoute !== false) metricsRoute(app, metrics);
  const routeDeps: RouteDeps = {
    ...deps,
    metrics,
    maskers: createRunMaskers(deps.pool, deps.keyring),
    logLines: new LogLineIndexes(deps.pool),
    hookFront,
    journalFront,
  };
  // Each resource is a plugin: an encapsulated child of this app, so it inherits the error and
  // not-found handlers and the input guard set above (a plugin's own parsers and hooks stay its own).
  const plugins = [
    whoamiRoutes,
    runRoutes,
    secretRoutes,
    credentialRoutes,
    accountRoutes,
    memberRoutes,
    userRoutes,
    tokenRoutes,
    signalRoutes,
    approvalRoutes,
    eventRoutes,
    emitRoutes,
    handlerRoutes,
    scheduleRoutes,
    hookRoutes,
    graphRoutes,
    graphEndpointRoutes,
    agentRoutes,
    agentCallRoutes,
    agentListRoutes,
    consoleRoutes,
  ];
  for (const plugin of plugins) void app.register(plugin, routeDeps);
  void app.register(openApiRoutes, { routes, version: "v1" });
  return app;
};
