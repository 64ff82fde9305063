import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { FlowError, PLATFORM_EVENT_TYPES, parseDuration } from "@flowsvc/core";
import { getEvent, listEvents, listSeenEventTypes } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { RouteDeps } from "../deps.js";
import { maskEventRecord } from "../run-masker.js";
import { api } from "../openapi/route-doc.js";

/** The catalog lists at most this many seen types, each with its latest payload up to this size. */
export const CATALOG_TYPE_LIMIT = 500;
export const CATALOG_SAMPLE_BYTES = 64 * 1024;

const ISO_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** `since`: a duration back from now (`1h`, `30m`) or an ISO 8601 time; answered as a time. */
export const parseSince = (text: string, now: Date): Date => {
  if (ISO_TIME.test(text.trim())) {
    const ms = Date.parse(text.trim());
    if (!Number.isNaN(ms)) return new Date(ms);
  } else {
    try {
      return new Date(now.getTime() - parseDuration(text));
    } catch {
      // reported below, with both accepted forms
    }
  }
  throw new FlowError(
    "invalid_argument",
    `since: ${JSON.stringify(text)} is neither a duration (30m, 2h, 7d) nor an ISO 8601 time (2025-01-31T12:00:00Z)`,
  );
};

const ListQuery = z.object({
  type: z.string().max(64).optional(),
  key: z.string().max(512).optional(),
  since: z.string().max(64).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(50),
});

export const eventRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  const { pool } = deps;
  const { maskers } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/events";

  app.get(
    base,
    api({ summary: "List the project's events, newest first", tag: "events", auth: "viewer", query: ListQuery }),
    async (req) => {
      const scope = await authorize(pool, req, "viewer");
      const { since, ...filter } = ListQuery.parse(req.query);
      const { masker } = await maskers.forProject(scope.projectId);
      const events = (await listEvents(pool, scope.projectId, filter)).map((e) => maskEventRecord(masker, e));
      if (since === undefined) return events;
      // Newest first, so the events since a time are a prefix of this list: filtering it is exact.
      const from = parseSince(since, new Date()).getTime();
      return events.filter((e) => Date.parse(e.created_at) >= from);
    },
  );

  // Static segments win over `:id` in Fastify's router, so this is never read as an event id.
  const catalogDoc = api({ summary: "The event types: platform, declared, and seen with a sample payload", tag: "events", auth: "viewer" });
  app.get(`${base}/catalog`, catalogDoc, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { masker } = await maskers.forProject(scope.projectId);
    const seen = (await listSeenEventTypes(pool, scope.projectId, { limit: CATALOG_TYPE_LIMIT, sampleBytes: CATALOG_SAMPLE_BYTES })).map(
      (t) => ({ ...maskEventRecord(masker, t), sample_payload: masker.json(t.sample_payload) }),
    );
    return {
      platform: Object.entries(PLATFORM_EVENT_TYPES).map(([type, description]) => ({ type, description })),
      // Graphs arrive in a later version; the section is here so clients need not change then.
      declared: [] as Array<{ type: string; graph: string }>,
      seen,
      seen_truncated: seen.length >= CATALOG_TYPE_LIMIT,
    };
  });

  app.get(`${base}/:id`, api({ summary: "Show an event", tag: "events", auth: "viewer" }), async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { id } = req.params as { id: string };
    const e = await getEvent(pool, scope.projectId, id);
    if (!e) throw new FlowError("not_found", `event ${id} not found in ${scope.org}/${scope.project}`);
    return maskEventRecord((await maskers.forProject(scope.projectId)).masker, e);
  });
  done();
};
