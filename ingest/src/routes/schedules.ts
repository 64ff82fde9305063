import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { FlowError, SOURCE_LIMIT, ScheduleName, ScheduleSpec, parseSchedule, type ScheduleRecord } from "@flowsvc/core";
import { deleteSchedule, getSchedule, listSchedules, setSchedulePaused, upsertSchedule } from "@flowsvc/store";
import { authorize, type Scope } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";

const NameParams = z.object({ org: z.string(), project: z.string(), name: ScheduleName });

/** A schedule as `ls` lists it: the script's file name and size, not its text. */
const summarise = (s: ScheduleRecord) => {
  const { source, ...script } = s.reaction;
  return { ...s, reaction: { ...script, size: Buffer.byteLength(source) } };
};

/** `show` adds the source: it is code, not a secret (credentials arrive by name only). */
const describe = (s: ScheduleRecord) => ({ ...summarise(s), reaction: { ...summarise(s).reaction, source: s.reaction.source } });

const notFound = (scope: Scope, name: string): FlowError =>
  new FlowError("not_found", `schedule ${name} not found in ${scope.org}/${scope.project}`, {
    hint: "list schedules with `flow schedule ls`",
  });

/**
 * Schedules are code run on a clock, like handlers are code run on an event: any member may set,
 * pause, resume or remove one (its runs get the project's secrets, as any member's submit does);
 * viewers list and show them. Written straight to Postgres in both modes (no custom resource:
 * next_fire_at is the controller's state, not intent).
 */
export const scheduleRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const { pool } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/schedules";

  app.get(base, api({ summary: "List schedules", tag: "schedules", auth: "viewer" }), async (req) => {
    const scope = await authorize(pool, req, "viewer");
    return (await listSchedules(pool, scope.projectId)).map(summarise);
  });

  app.get(
    `${base}/:name`,
    api({ summary: "Show a schedule with its script", tag: "schedules", auth: "viewer", params: NameParams }),
    async (req) => {
      const scope = await authorize(pool, req, "viewer");
      const { name } = NameParams.parse(req.params);
      const s = await getSchedule(pool, scope.projectId, name);
      if (!s) throw notFound(scope, name);
      return describe(s);
    },
  );

  const setDoc = api({
    summary: "Create (201) or replace (200) a schedule",
    tag: "schedules",
    auth: "member",
    params: NameParams,
    body: ScheduleSpec,
    response: { status: 201, description: "the schedule; 200 when it replaced one" },
  });
  app.put(`${base}/:name`, { bodyLimit: 2 * SOURCE_LIMIT, ...setDoc }, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const { name } = NameParams.parse(req.params);
    const input = parseSchedule(name, req.body, new Date());
    const { schedule, created } = await upsertSchedule(pool, scope.projectId, { ...input, createdBy: scope.caller.userId });
    req.log.info(
      { schedule: name, cron: schedule.cron, tz: schedule.tz, created, caller: scope.caller.userName },
      created ? "schedule created" : "schedule replaced",
    );
    return reply.status(created ? 201 : 200).send(describe(schedule));
  });

  const removeDoc = api({ summary: "Delete a schedule", tag: "schedules", auth: "member", params: NameParams, response: { status: 204 } });
  app.delete(`${base}/:name`, removeDoc, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const { name } = NameParams.parse(req.params);
    if (!(await deleteSchedule(pool, scope.projectId, name))) throw notFound(scope, name);
    req.log.info({ schedule: name, caller: scope.caller.userName }, "schedule removed");
    return reply.status(204).send();
  });

  for (const action of ["pause", "resume"] as const) {
    const doc = api({
      summary: action === "pause" ? "Pause a schedule (no ticks until resumed)" : "Resume a schedule (the next fire after now)",
      tag: "schedules",
      auth: "member",
      params: NameParams,
      body: null,
    });
    app.post(`${base}/:name/${action}`, doc, async (req) => {
      const scope = await authorize(pool, req, "member");
      const { name } = NameParams.parse(req.params);
      const s = await setSchedulePaused(pool, { projectId: scope.projectId, name, paused: action === "pause", now: new Date() });
      if (!s) throw notFound(scope, name);
      req.log.info({ schedule: name, caller: scope.caller.userName }, action === "pause" ? "schedule paused" : "schedule resumed");
      return summarise(s);
    });
  }
  done();
};
