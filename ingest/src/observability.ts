/**
 * What the app tells an operator (issue 15, item 6): every answer counted and timed by its route's
 * template (ServiceMetrics, store/src/metrics.ts), and `GET /metrics` in Prometheus's text format
 * (an option of buildApp: `flow server` serves it on its one port; flowsvc-ingest turns it off and
 * serves the same registry on FLOWSVC_METRICS_PORT, a port its Ingress does not route to).
 *
 * `/metrics` takes no token, as Prometheus scrapers expect: it holds counts and timings whose label
 * values are bounded enums (route templates, statuses, error codes, reasons), never a name, id,
 * header or value a caller sent (README "Metrics").
 */
import type { FastifyInstance } from "fastify";
import type { ServiceMetrics } from "@flowsvc/store";

/** A journal record of a step (not a sleep, a wait or another durable call). */
const isStep = (body: unknown): boolean => (body as { kind?: unknown } | null)?.kind === "step";

/** One answer counted and timed (`route`: the template, undefined when no route matched); `body`: the request's parsed body. */
export const observeAnswer = (
  metrics: ServiceMetrics,
  answer: { method: string; route: string | undefined; status: number; seconds: number; body: unknown },
): void => {
  const { method, route, status, seconds } = answer;
  metrics.httpAnswered({ method, route, status, seconds });
  if (status < 300 && route === "/agent/v1/claim") metrics.claimSeconds.observe(seconds);
  if (status < 300 && route === "/agent/v1/journal" && isStep(answer.body)) metrics.stepSeconds.observe(seconds);
};

/** Counts and times every answer of the app. */
export const observe = (app: FastifyInstance, metrics: ServiceMetrics): void => {
  app.addHook("onResponse", (req, reply, done) => {
    // The template (`/api/v1/orgs/:org/...`), never the URL; undefined when no route matched.
    const seconds = reply.elapsedTime / 1000;
    observeAnswer(metrics, { method: req.method, route: req.routeOptions.url, status: reply.statusCode, seconds, body: req.body });
    done();
  });
};

/** `GET /metrics` on the app's own port. */
export const metricsRoute = (app: FastifyInstance, metrics: ServiceMetrics): void => {
  app.get("/metrics", async (_req, reply) => {
    const text = await metrics.scrape();
    return reply.header("content-type", metrics.contentType).header("cache-control", "no-store").send(text);
  });
};
