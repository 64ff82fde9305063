import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { FlowError, HandlerName, HandlerSpec, SOURCE_LIMIT, parseHandler, reactionView, type HandlerRecord } from "@flowsvc/core";
import { getHandler, listHandlers } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";

const NameParams = z.object({ org: z.string(), project: z.string(), name: HandlerName });

/** A handler as `ls` lists it: the reaction's file name and size, not its text. */
const summarise = (h: HandlerRecord) => ({
  name: h.name,
  on: h.on,
  when: h.when,
  reaction: {
    kind: h.reaction.kind,
    filename: reactionView(h.reaction).filename,
    size: Buffer.byteLength(reactionView(h.reaction).source),
  },
  tags: h.tags,
  credentials: h.credentials,
  created_at: h.created_at,
  updated_at: h.updated_at,
});

/** `show` adds the source: it is code, not a secret (secrets and credentials arrive by name only). */
const describe = (h: HandlerRecord) => {
  const s = summarise(h);
  return { ...s, reaction: { ...s.reaction, source: reactionView(h.reaction).source, ...h.reaction } };
};

/**
 * Handlers are code, like a repository's workflow files: any member may set or remove one (a
 * handler runs with the project's secrets, as any member's submitted script does); viewers list them.
 */
export const handlerRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const { pool, resources } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/handlers";

  app.get(base, api({ summary: "List handlers", tag: "handlers", auth: "viewer" }), async (req) => {
    const scope = await authorize(pool, req, "viewer");
    return (await listHandlers(pool, scope.projectId)).map(summarise);
  });

  app.get(
    `${base}/:name`,
    api({ summary: "Show a handler with its source", tag: "handlers", auth: "viewer", params: NameParams }),
    async (req) => {
      const scope = await authorize(pool, req, "viewer");
      const { name } = NameParams.parse(req.params);
      const h = await getHandler(pool, scope.projectId, name);
      if (!h)
        throw new FlowError("not_found", `handler ${name} not found in ${scope.org}/${scope.project}`, {
          hint: "list handlers with `flow handler ls`",
        });
      return describe(h);
    },
  );

  const setDoc = api({
    summary: "Create (201) or replace (200) a handler",
    tag: "handlers",
    auth: "member",
    params: NameParams,
    body: HandlerSpec,
    response: { status: 201, description: "the handler; 200 when it replaced one" },
  });
  app.put(`${base}/:name`, { bodyLimit: 2 * SOURCE_LIMIT, ...setDoc }, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const { name } = NameParams.parse(req.params);
    const { handler, created } = await resources.putHandler(scope, parseHandler(name, req.body));
    req.log.info(
      { handler: name, on: handler.on, created, caller: scope.caller.userName },
      created ? "handler created" : "handler replaced",
    );
    return reply.status(created ? 201 : 200).send(describe(handler));
  });

  const removeDoc = api({ summary: "Delete a handler", tag: "handlers", auth: "member", params: NameParams, response: { status: 204 } });
  app.delete(`${base}/:name`, removeDoc, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const { name } = NameParams.parse(req.params);
    if (!(await resources.deleteHandler(scope, name)))
      throw new FlowError("not_found", `handler ${name} not found in ${scope.org}/${scope.project}`);
    req.log.info({ handler: name, caller: scope.caller.userName }, "handler removed");
    return reply.status(204).send();
  });
  done();
};
