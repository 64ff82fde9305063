/**
 * What the app tells an operator (issue 15, item 6): every answer counted and timed by its route's
 * template (ServiceMetrics, store/src/metrics.ts), and `GET /metrics` in Prometheus's text format.
 *
 * `/metrics` takes no token, as Prometheus scrapers expect: it holds counts and timings whose label
 * values are bounded enums (route templates, statuses, error codes, reasons), never a name, id,
 * header or value a caller sent. Operators who do not want it public keep it off their Ingress
 * (README "Metrics").
 */
import type { FastifyInstance } from "fastify";
import type { ServiceMetrics } from "@flowsvc/store";

/** A journal record of a step (not a sleep, a wait or another durable call). */
const isStep = (body: unknown): boolean => (body as { kind?: unknown } | null)?.kind === "step";

export const observe = (app: FastifyInstance, metrics: ServiceMetrics): void => {
  app.addHook("onResponse", (req, reply, done) => {
    // The template (`/api/v1/orgs/:org/...`), never the URL; undefined when no route matched.
    const route = req.routeOptions.url;
    const seconds = reply.elapsedTime / 1000;
    metrics.httpAnswered({ method: req.method, route, status: reply.statusCode, seconds });
    if (reply.statusCode < 300 && route === "/agent/v1/claim") metrics.claimSeconds.observe(seconds);
    if (reply.statusCode < 300 && route === "/agent/v1/journal" && isStep(req.body)) metrics.stepSeconds.observe(seconds);
    done();
  });
  app.get("/metrics", async (_req, reply) => {
    const text = await metrics.scrape();
    return reply.header("content-type", metrics.contentType).header("cache-control", "no-store").send(text);
  });
};
