import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { EMIT_BODY_LIMIT, EVENT_TYPE_JSON_SCHEMA, assertEmittable, trustOf } from "@flowsvc/core";
import { GroupCommitter, emitBatch, emitToHandlers, type EmitInput, type EmitResult } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";

/** A subject is a short label such as a repository (`acme/web`); the spec does not cap it, this does. */
export const EVENT_KEY_LIMIT = 512;

const EmitBody = z
  .object({
    // Its rule is assertEmittable's (after parsing, for its message); the API's description says it too (meta).
    type: z.string({ error: "type is required: the event type, e.g. deploy.requested" }).meta({ ...EVENT_TYPE_JSON_SCHEMA }),
    key: z
      .string()
      .min(1, "key is empty; leave it out for a broadcast event")
      .max(EVENT_KEY_LIMIT, `key is at most ${EVENT_KEY_LIMIT} characters`)
      .optional(),
    payload: z.unknown().optional(),
  })
  .strict();

/**
 * `POST {scoped}/events` (member): a user emit. The event row and every delivery it causes commit
 * in one transaction before the 201; a refused emit (a reserved or malformed type, a handler chain
 * too deep, too many handler runs in flight) records nothing.
 */
export const emitRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const { pool } = deps;
  // Emits that arrive while others commit go together in the next batch (one WAL flush, one turn
  // of the project's handler-runs lock): at 8 in flight they queued on that lock one by one. A
  // lone emit starts at once; one refused in a group is retried alone, so only it fails. A batch
  // goes in one round trip (emitToHandlers: the events, their script handler runs, and their jobs
  // dispatched to the server's free agents), or, when that declines, in a transaction (emitBatch).
  const committer = new GroupCommitter<EmitInput, EmitResult>(pool, emitBatch.apply, {
    begin: emitBatch.begin,
    alone: (db, inputs) => emitToHandlers(db, inputs, deps.dispatchSlots?.()),
  });
  app.addHook("onClose", () => committer.close());

  // Fastify compares the body with bodyLimit byte for byte: exactly 2 MiB is taken, one more is a 413.
  const doc = api({
    summary: "Publish an event; the handlers it matches start in the same transaction",
    tag: "events",
    auth: "member",
    body: EmitBody,
    response: {
      status: 201,
      description:
        "`{id, type, handler_runs, declined}`: `declined` lists the handlers that matched but start no run for this event, each `{handler, error}` (its `when` did not evaluate, its stored graph is gone, its pipeline's concurrency group did not evaluate)",
    },
    errors: [409, 429],
  });
  app.post("/api/v1/orgs/:org/projects/:project/events", { bodyLimit: EMIT_BODY_LIMIT, ...doc }, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const body = EmitBody.parse(req.body);
    const type = assertEmittable(body.type);
    const input: EmitInput = {
      projectId: scope.projectId,
      type,
      key: body.key ?? null,
      payload: body.payload ?? null,
      sourceRunId: null,
      trusted: trustOf({ by: "person" }),
      placement: { org: scope.org, project: scope.project },
    };
    const result = await committer.submit(input);
    // Its handler runs' jobs left queued are committed: this process's dispatcher takes them now, not after the NOTIFY comes back.
    if (result.wake !== undefined) deps.listener.local("flowsvc_jobs", result.wake);
    deps.metrics?.handlersDelivered(result);
    for (const d of result.declined)
      req.log.info({ eventId: result.eventId, type, handler: d.handler, err: d.error }, "handler declined the event");
    return reply.status(201).send({
      id: result.eventId,
      type,
      handler_runs: result.handlerRuns,
      declined: result.declined.map((d) => ({ handler: d.handler, error: d.error })),
    });
  });
  done();
};
