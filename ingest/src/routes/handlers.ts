import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { FlowError, HandlerName, SOURCE_LIMIT, parseHandler, type HandlerRecord } from "@flowsvc/core";
import { getHandler, listHandlers } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";

const NameParams = z.object({ org: z.string(), project: z.string(), name: HandlerName });

/** A handler as `ls` lists it: the reaction's file name and size, not its text. */
const summarise = (h: HandlerRecord) => ({
  name: h.name,
  on: h.on,
  when: h.when,
  reaction: { kind: h.reaction.kind, filename: h.reaction.filename, size: Buffer.byteLength(h.reaction.source) },
  tags: h.tags,
  credentials: h.credentials,
  created_at: h.created_at,
  updated_at: h.updated_at,
});

/** `show` adds the source: it is code, not a secret (secrets and credentials arrive by name only). */
const describe = (h: HandlerRecord) => {
  const s = summarise(h);
  return { ...s, reaction: { ...s.reaction, source: h.reaction.source } };
};

/**
 * Handlers are code, like a repository's workflow files: any member may set or remove one (a
 * handler runs with the project's secrets, as any member's submitted script does); viewers list them.
 */
export const handlerRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const { pool, resources } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/handlers";

  app.get(base, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    return (await listHandlers(pool, scope.projectId)).map(summarise);
  });

  app.get(`${base}/:name`, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { name } = NameParams.parse(req.params);
    const h = await getHandler(pool, scope.projectId, name);
    if (!h)
      throw new FlowError("not_found", `handler ${name} not found in ${scope.org}/${scope.project}`, {
        hint: "list handlers with `flow handler ls`",
      });
    return describe(h);
  });

  app.put(`${base}/:name`, { bodyLimit: 2 * SOURCE_LIMIT }, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const { name } = NameParams.parse(req.params);
    const { handler, created } = await resources.putHandler(scope, parseHandler(name, req.body));
    req.log.info(
      { handler: name, on: handler.on, created, caller: scope.caller.userName },
      created ? "handler created" : "handler replaced",
    );
    return reply.status(created ? 201 : 200).send(describe(handler));
  });

  app.delete(`${base}/:name`, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const { name } = NameParams.parse(req.params);
    if (!(await resources.deleteHandler(scope, name)))
      throw new FlowError("not_found", `handler ${name} not found in ${scope.org}/${scope.project}`);
    req.log.info({ handler: name, caller: scope.caller.userName }, "handler removed");
    return reply.status(204).send();
  });
  done();
};
