import type { FastifyPluginCallback } from "fastify";
import { listMemberships } from "@flowsvc/store";
import { authenticateUser } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";

export const whoamiRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  app.get("/api/v1/whoami", api({ summary: "The token's user and their project roles", tag: "meta", auth: "user" }), async (req) => {
    const caller = await authenticateUser(deps.pool, req);
    return { user: caller.userName, projects: await listMemberships(deps.pool, caller.userId) };
  });
  // Liveness: the process answers (no I/O). Readiness: Postgres answers too.
  app.get("/healthz", (_req, reply) => reply.send({ ok: true }));
  app.get("/readyz", async (_req, reply) => {
    try {
      await deps.pool.query("select 1");
      return await reply.send({ ok: true });
    } catch {
      return reply.code(503).send({ ok: false, error: { code: "unavailable", message: "postgres does not answer" } });
    }
  });
  done();
};
