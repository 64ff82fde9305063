import type { FastifyPluginCallback } from "fastify";
import { listMemberships } from "@flowsvc/store";
import { authenticateUser } from "../auth.js";
import type { IngestDeps } from "../deps.js";

export const whoamiRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  app.get("/api/v1/whoami", async (req) => {
    const caller = await authenticateUser(deps.pool, req);
    return { user: caller.userName, projects: await listMemberships(deps.pool, caller.userId) };
  });
  app.get("/healthz", (_req, reply) => reply.send({ ok: true }));
  done();
};
