/**
 * Inbound event hooks (spec "Event hook", "Authentication" 2; SECURITY.md "Event hooks").
 *
 * Management, under `{scoped}/event-hooks[/{name}[/rotate]]`: viewers list and show, admins set,
 * rotate and remove. Choices where the spec is silent:
 * - `set` of an existing hook replaces its configuration and keeps its secret (senders keep
 *   working); only a creating `set` (201) and `rotate` answer with a secret, once.
 * - A manual-HMAC hook emits its own name as the type unless `--event-type` names one.
 * - A signed hook (manifest or manual HMAC) is authenticated by the signature; the shared secret is
 *   optional there (GitHub cannot add headers), but a wrong one sent along is refused.
 * - An unknown hook is a 404 (hook names are not secrets); the secret and signatures are 401s.
 * - Query values are strings, the first of a repeated name wins, and `secret` is never kept.
 */
import { z } from "zod";
import type { FastifyInstance, FastifyPluginCallback, FastifyRequest } from "fastify";
import { FlowError, HookName, HookSetBody, hookIngestUrl, parseHook, type HookRecord } from "@flowsvc/core";
import { getHook, listHooks } from "@flowsvc/store";
import { authorize } from "../auth.js";
import { HookCache } from "../hook-cache.js";
import type { RouteDeps } from "../deps.js";
import { hookIngestRoutes } from "./hook-ingest.js";
import { api } from "../openapi/route-doc.js";

export { HOOK_SECRET_HEADER } from "./hook-ingest.js";

const NameParams = z.object({ org: z.string(), project: z.string(), name: HookName });

type Where = { org: string; project: string };

/** What the management routes share: the deps, and the cache hook ingest verifies against (forgotten on every change). */
interface HookCtx {
  deps: RouteDeps;
  hooks: HookCache;
}

const BASE = "/api/v1/orgs/:org/projects/:project/event-hooks";

const ingestUrl = (publicUrl: string | undefined, req: FastifyRequest, where: Where, name: string): string =>
  hookIngestUrl(publicUrl ?? `${req.protocol}://${req.host}`, where.org, where.project, name);

/** A hook as answered: what it emits and the URL senders post to. */
const describe = ({ deps }: HookCtx, req: FastifyRequest, where: Where, h: HookRecord) => ({
  ...h,
  emits: h.mode === "manifest" ? `${h.name}.<event>, ${h.name}.pull_request.<action>` : h.event_type,
  ingest_url: ingestUrl(deps.publicUrl, req, where, h.name),
});

const notFound = (where: Where, name: string): FlowError =>
  new FlowError("not_found", `event hook ${name} not found in ${where.org}/${where.project}`, {
    hint: "list hooks with `flow event-hook ls`",
  });

const listRoute = (app: FastifyInstance, ctx: HookCtx): void => {
  app.get(BASE, api({ summary: "List event hooks", tag: "event-hooks", auth: "viewer" }), async (req) => {
    const scope = await authorize(ctx.deps.pool, req, "viewer");
    return (await listHooks(ctx.deps.pool, scope.projectId)).map((h) => describe(ctx, req, scope, h));
  });
};

const showRoute = (app: FastifyInstance, ctx: HookCtx): void => {
  app.get(
    `${BASE}/:name`,
    api({ summary: "Show an event hook (never its secret)", tag: "event-hooks", auth: "viewer", params: NameParams }),
    async (req) => {
      const scope = await authorize(ctx.deps.pool, req, "viewer");
      const { name } = NameParams.parse(req.params);
      const h = await getHook(ctx.deps.pool, scope.projectId, name);
      if (!h) throw notFound(scope, name);
      return describe(ctx, req, scope, h);
    },
  );
};

/**
 * Create (201, with the new secret: the only answer that ever carries it besides rotate) or
 * replace the configuration (200, the secret kept so senders keep working).
 */
const setRoute = (app: FastifyInstance, ctx: HookCtx): void => {
  const { pool, resources } = ctx.deps;
  const doc = api({
    summary: "Create (201, with its secret, once) or replace (200, secret kept) an event hook",
    tag: "event-hooks",
    auth: "admin",
    params: NameParams,
    body: HookSetBody,
    response: { status: 201, description: "the hook, its ingest URL, and `secret` when one was minted" },
  });
  app.put(`${BASE}/:name`, doc, async (req, reply) => {
    const scope = await authorize(pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const { spec, signingKey } = parseHook(name, req.body);
    const { hook, created, minted } = await resources.putHook(scope, {
      name,
      spec,
      signingKey: signingKey === null ? { kind: "none" } : { kind: "given", value: signingKey },
      secret: { kind: "mint" },
    });
    ctx.hooks.forget(scope.org, scope.project, name);
    req.log.info(
      { hook: name, mode: hook.mode, created, caller: scope.caller.userName },
      created ? "event hook created" : "event hook replaced",
    );
    return reply
      .status(created ? 201 : 200)
      .send({ ...describe(ctx, req, scope, hook), ...(minted !== undefined ? { secret: minted } : { secret_kept: true }) });
  });
};

const rotateRoute = (app: FastifyInstance, ctx: HookCtx): void => {
  const doc = api({
    summary: "Mint a new secret; the old one stops working",
    tag: "event-hooks",
    auth: "admin",
    params: NameParams,
    body: null,
  });
  app.post(`${BASE}/:name/rotate`, doc, async (req) => {
    const scope = await authorize(ctx.deps.pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const rotated = await ctx.deps.resources.rotateHookSecret(scope, name);
    ctx.hooks.forget(scope.org, scope.project, name);
    if (!rotated) throw notFound(scope, name);
    req.log.info({ hook: name, caller: scope.caller.userName }, "event hook secret rotated");
    return { ...describe(ctx, req, scope, rotated.hook), secret: rotated.minted };
  });
};

const removeRoute = (app: FastifyInstance, ctx: HookCtx): void => {
  const doc = api({ summary: "Delete an event hook", tag: "event-hooks", auth: "admin", params: NameParams, response: { status: 204 } });
  app.delete(`${BASE}/:name`, doc, async (req, reply) => {
    const scope = await authorize(ctx.deps.pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const deleted = await ctx.deps.resources.deleteHook(scope, name);
    ctx.hooks.forget(scope.org, scope.project, name);
    if (!deleted) throw notFound(scope, name);
    req.log.info({ hook: name, caller: scope.caller.userName }, "event hook removed");
    return reply.status(204).send();
  });
};

/** Management under `{scoped}/event-hooks` and ingest under `/api/v1/hooks`, sharing one hook cache. */
export const hookRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  const ctx = { deps, hooks: new HookCache(deps.pool) };
  for (const route of [listRoute, showRoute, setRoute, rotateRoute, removeRoute]) route(app, ctx);
  void app.register(hookIngestRoutes, ctx);
  done();
};
