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
import { FlowError, assertEmittable, isReservedType } from "@flowsvc/core";
import {
  HOOK_MANIFESTS,
  deleteHook,
  getHook,
  hookSealName,
  listHooks,
  mintHookSecret,
  rotateHookSecret,
  upsertHook,
  type HookConfig,
  type HookRecord,
} from "@flowsvc/store";
import { authorize } from "../auth.js";
import { HookCache } from "../hook-cache.js";
import type { IngestDeps } from "../deps.js";
import { hookIngestRoutes } from "./hook-ingest.js";

export { HOOK_SECRET_HEADER } from "./hook-ingest.js";

/** A hook's name routes its events (`<hook>.<forge event>`), so it must be a valid, non-platform type prefix. */
export const HOOK_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;

const HookName = z
  .string()
  .regex(HOOK_NAME, "a hook name is 1-40 of A-Z a-z 0-9 . _ -, starting with a letter or digit")
  .refine(
    (n) => !isReservedType(n) && !isReservedType(`${n}.x`),
    "a hook name may not be a platform type or namespace (push, manual, spawn, schedule.tick, run, flow)",
  );
const NameParams = z.object({ org: z.string(), project: z.string(), name: HookName });

const SetBody = z
  .object({
    event_type: z.string().optional(),
    manifest: z.string().optional(),
    key: z.string().min(1, "key is empty").max(4096).optional(),
    hmac_header: z.string().regex(HEADER_NAME, "hmac_header must be an HTTP header name").optional(),
    hmac_key: z.string().min(1, "hmac_key is empty").max(4096).optional(),
    hmac_prefix: z.string().max(64).optional(),
  })
  .strict();
type SetBody = z.infer<typeof SetBody>;

const refuse = (message: string): never => {
  throw new FlowError("invalid_argument", message, { hint: "see `flow event-hook set --help`" });
};

type HookSetup = { cfg: Omit<HookConfig, "keySealed">; key: string | null };

const manifestConfig = (name: string, b: SetBody & { manifest: string }, hmac: boolean): HookSetup => {
  if (hmac) refuse("give either --manifest or --hmac-header/--hmac-key, not both");
  if (b.event_type !== undefined) refuse(`a manifest hook derives each delivery's type (${name}.<event>); leave out --event-type`);
  if (!(HOOK_MANIFESTS as readonly string[]).includes(b.manifest))
    refuse(`unknown manifest "${b.manifest}"; the built-in manifests are: ${HOOK_MANIFESTS.join(", ")}`);
  if (b.key === undefined) refuse(`--manifest ${b.manifest} needs --key <signing_key>: the secret the forge signs deliveries with`);
  return {
    cfg: { mode: "manifest", eventType: null, manifest: b.manifest as HookConfig["manifest"], hmacHeader: null, hmacPrefix: null },
    key: b.key!,
  };
};

const hmacConfig = (name: string, b: SetBody): HookSetup => {
  if (b.hmac_header === undefined || b.hmac_key === undefined)
    refuse("a manual HMAC hook needs both --hmac-header and --hmac-key (--hmac-prefix is optional)");
  // Without --event-type a manual HMAC hook emits its own name as the type.
  const eventType = b.event_type === undefined ? name : assertEmittable(b.event_type);
  return {
    cfg: { mode: "hmac", eventType, manifest: null, hmacHeader: b.hmac_header!.toLowerCase(), hmacPrefix: b.hmac_prefix ?? "" },
    key: b.hmac_key!,
  };
};

/** The mode the flags ask for, checked for a complete and unambiguous combination. Returns the config without its sealed key. */
const configOf = (name: string, b: SetBody): HookSetup => {
  const hmac = b.hmac_header !== undefined || b.hmac_key !== undefined || b.hmac_prefix !== undefined;
  if (b.manifest !== undefined) return manifestConfig(name, { ...b, manifest: b.manifest }, hmac);
  if (b.key !== undefined) refuse("--key goes with --manifest; a manual HMAC hook takes --hmac-key");
  if (hmac) return hmacConfig(name, b);
  if (b.event_type === undefined)
    refuse("give --event-type <type> (shared token), --manifest <m> --key <k>, or --hmac-header <h> --hmac-key <k>");
  return {
    cfg: { mode: "token", eventType: assertEmittable(b.event_type!), manifest: null, hmacHeader: null, hmacPrefix: null },
    key: null,
  };
};

type Where = { org: string; project: string };

/** What the management routes share: the deps, and the cache hook ingest verifies against (forgotten on every change). */
interface HookCtx {
  deps: IngestDeps;
  hooks: HookCache;
}

const BASE = "/api/v1/orgs/:org/projects/:project/event-hooks";

const ingestUrl = (publicUrl: string | undefined, req: FastifyRequest, where: Where, name: string): string =>
  `${publicUrl?.replace(/\/+$/, "") ?? `${req.protocol}://${req.host}`}/api/v1/hooks/${[where.org, where.project, name].map(encodeURIComponent).join("/")}`;

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
  app.get(BASE, async (req) => {
    const scope = await authorize(ctx.deps.pool, req, "viewer");
    return (await listHooks(ctx.deps.pool, scope.projectId)).map((h) => describe(ctx, req, scope, h));
  });
};

const showRoute = (app: FastifyInstance, ctx: HookCtx): void => {
  app.get(`${BASE}/:name`, async (req) => {
    const scope = await authorize(ctx.deps.pool, req, "viewer");
    const { name } = NameParams.parse(req.params);
    const h = await getHook(ctx.deps.pool, scope.projectId, name);
    if (!h) throw notFound(scope, name);
    return describe(ctx, req, scope, h);
  });
};

/**
 * Create (201, with the new secret: the only answer that ever carries it besides rotate) or
 * replace the configuration (200, the secret kept so senders keep working).
 */
const setRoute = (app: FastifyInstance, ctx: HookCtx): void => {
  const { pool, keyring } = ctx.deps;
  app.put(`${BASE}/:name`, async (req, reply) => {
    const scope = await authorize(pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const { cfg, key } = configOf(name, SetBody.parse(req.body ?? {}));
    const keySealed =
      key === null
        ? null
        : await keyring.seal(
            scope.orgId,
            { org: scope.orgId, project: scope.projectId, kind: "credential", name: hookSealName(name) },
            key,
          );
    const minted = mintHookSecret();
    const { hook, created } = await upsertHook(pool, { projectId: scope.projectId, name }, { ...cfg, keySealed }, minted.digest);
    ctx.hooks.forget(scope.org, scope.project, name);
    req.log.info(
      { hook: name, mode: hook.mode, created, caller: scope.caller.userName },
      created ? "event hook created" : "event hook replaced",
    );
    return reply
      .status(created ? 201 : 200)
      .send({ ...describe(ctx, req, scope, hook), ...(created ? { secret: minted.secret } : { secret_kept: true }) });
  });
};

const rotateRoute = (app: FastifyInstance, ctx: HookCtx): void => {
  app.post(`${BASE}/:name/rotate`, async (req) => {
    const scope = await authorize(ctx.deps.pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const minted = mintHookSecret();
    const hook = await rotateHookSecret(ctx.deps.pool, scope.projectId, name, minted.digest);
    ctx.hooks.forget(scope.org, scope.project, name);
    if (!hook) throw notFound(scope, name);
    req.log.info({ hook: name, caller: scope.caller.userName }, "event hook secret rotated");
    return { ...describe(ctx, req, scope, hook), secret: minted.secret };
  });
};

const removeRoute = (app: FastifyInstance, ctx: HookCtx): void => {
  app.delete(`${BASE}/:name`, async (req, reply) => {
    const scope = await authorize(ctx.deps.pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const deleted = await deleteHook(ctx.deps.pool, scope.projectId, name);
    ctx.hooks.forget(scope.org, scope.project, name);
    if (!deleted) throw notFound(scope, name);
    req.log.info({ hook: name, caller: scope.caller.userName }, "event hook removed");
    return reply.status(204).send();
  });
};

/** Management under `{scoped}/event-hooks` and ingest under `/api/v1/hooks`, sharing one hook cache. */
export const hookRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const ctx = { deps, hooks: new HookCache(deps.pool) };
  for (const route of [listRoute, showRoute, setRoute, rotateRoute, removeRoute]) route(app, ctx);
  void app.register(hookIngestRoutes, ctx);
  done();
};
