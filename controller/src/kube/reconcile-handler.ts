// FlowHandler -> Postgres: the spec checked by core's parseHandlerResource (the API's rules and messages: a
// `when` that does not compile is Ready=False/InvalidSpec with the compiler's message), written
// through the Postgres ResourceStore only when it differs from the stored handler.
import type { Pool } from "pg";
import { parseHandlerResource, type HandlerInput, type HandlerResourceSpec, type ResourceStore } from "@flowsvc/core";
import { getHandler, listHandlers } from "@flowsvc/store";
import type { ConfigKind } from "./reconcile-config.js";
import type { FlowObject } from "./reconcile-kinds.js";
import { canonicalJson } from "./flowrun-summary.js";

export type FlowHandlerObject = FlowObject<HandlerResourceSpec, Record<string, unknown>>;

const stored = (h: HandlerInput) =>
  canonicalJson({ on: h.on, when: h.when, reaction: h.reaction, tags: h.tags, credentials: h.credentials });

export const handlerKind = (pool: Pool, store: ResourceStore): ConfigKind<FlowHandlerObject> => ({
  kind: "handler",
  apply: async (obj, scope, name) => {
    const input = parseHandlerResource(name, obj.spec);
    const current = await getHandler(pool, scope.projectId, name);
    if (!current || stored(current) !== stored(input)) await store.putHandler(scope, input);
    return { ready: true };
  },
  remove: (scope, name) => store.deleteHandler(scope, name),
  stored: async (projectId) => (await listHandlers(pool, projectId)).map((h) => ({ name: h.name, writtenAt: new Date(h.updated_at) })),
});
