import { z } from "zod";
import type { FastifyInstance } from "fastify";
import { FlowError } from "@flowsvc/core";
import { getEvent, listEvents } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";

const ListQuery = z.object({
  type: z.string().max(64).optional(),
  key: z.string().max(512).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(50),
});

export const eventRoutes = (app: FastifyInstance, deps: IngestDeps): void => {
  const { pool } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/events";

  app.get(base, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    return listEvents(pool, scope.projectId, ListQuery.parse(req.query));
  });

  app.get(`${base}/:id`, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { id } = req.params as { id: string };
    const e = await getEvent(pool, scope.projectId, id);
    if (!e) throw new FlowError("not_found", `event ${id} not found in ${scope.org}/${scope.project}`);
    return e;
  });
};
