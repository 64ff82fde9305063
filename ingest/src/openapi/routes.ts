import type { FastifyPluginCallback } from "fastify";
import { buildOpenApi, type RegisteredRoute } from "./document.js";
import { api } from "./route-doc.js";

/** `GET /api/v1/openapi.json`: no token; built once, on the first request, from every route registered by then (all of them). */
export const openApiRoutes: FastifyPluginCallback<{ routes: readonly RegisteredRoute[]; version: string }> = (app, opts, done) => {
  let document: string | undefined;
  app.get(
    "/api/v1/openapi.json",
    api({ summary: "This API's OpenAPI 3.1 document", tag: "meta", auth: "none", response: { description: "the document" } }),
    (_req, reply) => {
      document ??= JSON.stringify(buildOpenApi(opts.routes, opts.version));
      return reply.header("content-type", "application/json; charset=utf-8").send(document);
    },
  );
  done();
};
