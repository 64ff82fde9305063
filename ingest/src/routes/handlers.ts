import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { FlowError, compileCel, secretNameProblem, validatePattern } from "@flowsvc/core";
import { deleteHandler, getHandler, listHandlers, upsertHandler } from "@flowsvc/store";
import type { HandlerRecord } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";

export const HANDLER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Credential names share a name space with connected accounts; the spec shows no format, this is ours. */
export const CREDENTIAL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const SOURCE_LIMIT = 1024 * 1024;

const NameParams = z.object({
  org: z.string(),
  project: z.string(),
  name: z.string().regex(HANDLER_NAME, "a handler name is 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
});

const SetBody = z
  .object({
    on: z.array(z.string()).min(1, "give at least one type pattern (an exact type, prefix.* or *)").max(64),
    when: z.string().nullable().optional(),
    reaction: z
      .object({
        kind: z.literal("script", { error: 'only "script" is available in this version (yaml pipelines, graphs and nodes arrive later)' }),
        source: z.string().max(SOURCE_LIMIT, `the source is over ${SOURCE_LIMIT} bytes`),
        filename: z
          .string()
          .min(1)
          .max(255)
          .regex(/^[^/\\\0]+$/, "filename must be a base name, without slashes"),
      })
      .strict(),
    tags: z.array(z.string().min(1).max(128)).max(32).default([]),
    credentials: z
      .record(
        // The variable a credential is injected as follows the rule of a secret's name (checked after
        // parsing: zod reports a bad record key only as "Invalid key in record").
        z.string(),
        z.string().regex(CREDENTIAL_NAME, "a credential name is 1-128 of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
      )
      .default({}),
  })
  .strict();

/** The compiler's message and position, named after the field: `when: ... at line 1, column 9`. */
const compileWhen = (source: string): string => {
  try {
    compileCel(source, { variables: ["event"] });
  } catch (err) {
    if (err instanceof FlowError)
      throw new FlowError(err.code, `when: ${err.message}`, { details: { field: "when", ...err.details }, cause: err });
    throw err;
  }
  return source;
};

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
  const { pool } = deps;
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
    const body = SetBody.parse(req.body);
    for (const variable of Object.keys(body.credentials)) {
      const problem = secretNameProblem(variable, "credential variable");
      if (problem !== undefined)
        throw new FlowError("invalid_argument", `credentials: ${problem}`, { details: { field: `credentials.${variable}` } });
    }
    const on = [...new Set(body.on.map((p) => validatePattern(p.trim())))];
    // An empty `when` is refused (compileCel says so), not read as "always": it is likely an unset variable.
    const when = body.when === undefined || body.when === null ? null : compileWhen(body.when);
    const { handler, created } = await upsertHandler(pool, scope.projectId, {
      name,
      on,
      when,
      reaction: body.reaction,
      tags: body.tags,
      credentials: body.credentials,
    });
    req.log.info({ handler: name, on, created, caller: scope.caller.userName }, created ? "handler created" : "handler replaced");
    return reply.status(created ? 201 : 200).send(describe(handler));
  });

  app.delete(`${base}/:name`, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const { name } = NameParams.parse(req.params);
    if (!(await deleteHandler(pool, scope.projectId, name)))
      throw new FlowError("not_found", `handler ${name} not found in ${scope.org}/${scope.project}`);
    req.log.info({ handler: name, caller: scope.caller.userName }, "handler removed");
    return reply.status(204).send();
  });
  done();
};
