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
import type { FastifyInstance, FastifyRequest } from "fastify";
import {
  EMIT_BODY_LIMIT, FlowError, GITHUB_DELIVERY_HEADER, GITHUB_EVENT_HEADER, GITHUB_SIGNATURE_HEADER, assertEmittable, assertStorableJson, isReservedType,
  redactSecretQuery, shapeGithubDelivery, trustOf, verifyGithubSignature, verifyManualHmac,
} from "@flowsvc/core";
import {
  GroupCommitter, HOOK_MANIFESTS, StaleHookError, deleteHook, emitBatch, getHook, hookSealName, hookSecretMatches, listHooks,
  mintHookSecret, rotateHookSecret, upsertHook, type EmitInput, type EmitResult, type HookConfig, type HookRecord, type IngestHook,
} from "@flowsvc/store";
import { authorize } from "../auth.js";
import { HookCache } from "../hook-cache.js";
import type { IngestDeps } from "../deps.js";

/** A hook's name routes its events (`<hook>.<forge event>`), so it must be a valid, non-platform type prefix. */
export const HOOK_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$/;
export const HOOK_SECRET_HEADER = "x-flow-hook-secret";
const SECRET_HELP = "send the hook's secret in the X-Flow-Hook-Secret header (or, when headers cannot be set, in the secret query parameter)";
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;

const HookName = z
  .string()
  .regex(HOOK_NAME, "a hook name is 1-40 of A-Z a-z 0-9 . _ -, starting with a letter or digit")
  .refine((n) => !isReservedType(n) && !isReservedType(`${n}.x`), "a hook name may not be a platform type or namespace (push, manual, spawn, schedule.tick, run, flow)");
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

/** The mode the flags ask for, checked for a complete and unambiguous combination. Returns the config without its sealed key. */
const configOf = (name: string, b: SetBody): { cfg: Omit<HookConfig, "keySealed">; key: string | null } => {
  const hmac = b.hmac_header !== undefined || b.hmac_key !== undefined || b.hmac_prefix !== undefined;
  if (b.manifest !== undefined) {
    if (hmac) refuse("give either --manifest or --hmac-header/--hmac-key, not both");
    if (b.event_type !== undefined) refuse(`a manifest hook derives each delivery's type (${name}.<event>); leave out --event-type`);
    if (!(HOOK_MANIFESTS as readonly string[]).includes(b.manifest)) refuse(`unknown manifest "${b.manifest}"; the built-in manifests are: ${HOOK_MANIFESTS.join(", ")}`);
    if (b.key === undefined) refuse(`--manifest ${b.manifest} needs --key <signing_key>: the secret the forge signs deliveries with`);
    return { cfg: { mode: "manifest", eventType: null, manifest: b.manifest as HookConfig["manifest"], hmacHeader: null, hmacPrefix: null }, key: b.key! };
  }
  if (b.key !== undefined) refuse("--key goes with --manifest; a manual HMAC hook takes --hmac-key");
  if (hmac) {
    if (b.hmac_header === undefined || b.hmac_key === undefined) refuse("a manual HMAC hook needs both --hmac-header and --hmac-key (--hmac-prefix is optional)");
    // Without --event-type a manual HMAC hook emits its own name as the type.
    const eventType = b.event_type === undefined ? name : assertEmittable(b.event_type);
    return { cfg: { mode: "hmac", eventType, manifest: null, hmacHeader: b.hmac_header!.toLowerCase(), hmacPrefix: b.hmac_prefix ?? "" }, key: b.hmac_key! };
  }
  if (b.event_type === undefined) refuse("give --event-type <type> (shared token), --manifest <m> --key <k>, or --hmac-header <h> --hmac-key <k>");
  return { cfg: { mode: "token", eventType: assertEmittable(b.event_type), manifest: null, hmacHeader: null, hmacPrefix: null }, key: null };
};

/** The sender's secret: the header, else the `secret` query parameter. */
const presentedSecret = (req: FastifyRequest, query: URLSearchParams): string | undefined => {
  const h = req.headers[HOOK_SECRET_HEADER];
  return (typeof h === "string" ? h : undefined) ?? query.get("secret") ?? undefined;
};

/** Query values as strings (the first of a repeated name), without the secret. */
const queryObject = (query: URLSearchParams): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [k, v] of query) if (k !== "secret" && !(k in out)) out[k] = v;
  return out;
};

/** A JSON body keeps its types, an empty body is `{}`, anything else arrives verbatim as a string. */
const bodyValue = (raw: Buffer): unknown => {
  if (raw.length === 0) return {};
  const text = raw.toString("utf8");
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
};

/** GitHub's form content type sends the JSON as the `payload` field. */
const githubBody = (req: FastifyRequest, raw: Buffer): unknown => {
  const type = String(req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  const text = type === "application/x-www-form-urlencoded" ? (new URLSearchParams(raw.toString("utf8")).get("payload") ?? "") : raw.toString("utf8");
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new FlowError("invalid_argument", "the GitHub delivery's body is not JSON");
  }
};

const header = (req: FastifyRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return typeof v === "string" && v !== "" ? v : undefined;
};

export const hookRoutes = (app: FastifyInstance, deps: IngestDeps): void => {
  const { pool, keyring } = deps;
  const hooks = new HookCache(pool);
  const base = "/api/v1/orgs/:org/projects/:project/event-hooks";
  const ingestUrl = (req: FastifyRequest, org: string, project: string, name: string): string =>
    `${deps.publicUrl?.replace(/\/+$/, "") ?? `${req.protocol}://${req.host}`}/api/v1/hooks/${[org, project, name].map(encodeURIComponent).join("/")}`;
  const describe = (req: FastifyRequest, scope: { org: string; project: string }, h: HookRecord) => ({
    ...h,
    emits: h.mode === "manifest" ? `${h.name}.<event>, ${h.name}.pull_request.<action>` : h.event_type,
    ingest_url: ingestUrl(req, scope.org, scope.project, h.name),
  });
  const notFound = (scope: { org: string; project: string }, name: string): FlowError =>
    new FlowError("not_found", `event hook ${name} not found in ${scope.org}/${scope.project}`, { hint: "list hooks with `flow event-hook ls`" });

  app.get(base, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    return (await listHooks(pool, scope.projectId)).map((h) => describe(req, scope, h));
  });

  app.get(`${base}/:name`, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { name } = NameParams.parse(req.params);
    const h = await getHook(pool, scope.projectId, name);
    if (!h) throw notFound(scope, name);
    return describe(req, scope, h);
  });

  // Create (201, with the new secret: the only answer that ever carries it besides rotate) or
  // replace the configuration (200, the secret kept so senders keep working).
  app.put(`${base}/:name`, async (req, reply) => {
    const scope = await authorize(pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const { cfg, key } = configOf(name, SetBody.parse(req.body ?? {}));
    const keySealed = key === null ? null : await keyring.seal(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "credential", name: hookSealName(name) }, key);
    const minted = mintHookSecret();
    const { hook, created } = await upsertHook(pool, { projectId: scope.projectId, name }, { ...cfg, keySealed }, minted.digest);
    hooks.forget(scope.org, scope.project, name);
    req.log.info({ hook: name, mode: hook.mode, created, caller: scope.caller.userName }, created ? "event hook created" : "event hook replaced");
    return reply.status(created ? 201 : 200).send({ ...describe(req, scope, hook), ...(created ? { secret: minted.secret } : { secret_kept: true }) });
  });

  app.post(`${base}/:name/rotate`, async (req) => {
    const scope = await authorize(pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const minted = mintHookSecret();
    const hook = await rotateHookSecret(pool, scope.projectId, name, minted.digest);
    hooks.forget(scope.org, scope.project, name);
    if (!hook) throw notFound(scope, name);
    req.log.info({ hook: name, caller: scope.caller.userName }, "event hook secret rotated");
    return { ...describe(req, scope, hook), secret: minted.secret };
  });

  app.delete(`${base}/:name`, async (req, reply) => {
    const scope = await authorize(pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const deleted = await deleteHook(pool, scope.projectId, name);
    hooks.forget(scope.org, scope.project, name);
    if (!deleted) throw notFound(scope, name);
    req.log.info({ hook: name, caller: scope.caller.userName }, "event hook removed");
    return reply.status(204).send();
  });

  ingestRoutes(app, deps, hooks);
};

/**
 * `POST /api/v1/hooks/{org}/{project}/{name}`: no user authentication; the hook's secret or the
 * delivery's signature is the credential. The raw bytes are kept for signatures whatever the
 * content type. The 202 is sent only after the event's transaction committed (group commit).
 */
const ingestRoutes = (app: FastifyInstance, deps: IngestDeps, hooks: HookCache): void => {
  const { pool, keyring } = deps;
  // A redelivery racing its first delivery in another batch waits on the unique index and then
  // answers the first one's event (emitEvents), so no retry is needed here.
  const committer = new GroupCommitter<EmitInput, EmitResult>(pool, emitBatch.apply, { begin: emitBatch.begin });
  app.addHook("onClose", () => committer.close());

  const refused = (req: FastifyRequest, hook: string, reason: string, message: string, hint?: string): FlowError => {
    req.log.info({ hook, url: redactSecretQuery(req.url), reason }, "hook delivery refused");
    return new FlowError("unauthenticated", message, hint ? { hint } : {});
  };

  const openKey = (hook: IngestHook): Promise<string> =>
    keyring.open(hook.orgId, { org: hook.orgId, project: hook.projectId, kind: "credential", name: hookSealName(hook.name) }, hook.keySealed!);

  /** A GitHub delivery: signature over the raw bytes, then shaped by the manifest; dedup on its delivery id. */
  const githubEmit = async (req: FastifyRequest, hook: IngestHook, raw: Buffer): Promise<Omit<EmitInput, "projectId" | "sourceRunId" | "hookName" | "payload"> & { body: unknown }> => {
    const signature = req.headers[GITHUB_SIGNATURE_HEADER];
    if (!(await verifyGithubSignature(await openKey(hook), raw, signature))) {
      const what = signature === undefined ? "the delivery has no X-Hub-Signature-256 header" : "the X-Hub-Signature-256 signature does not match the body";
      throw refused(req, hook.name, signature === undefined ? "no signature" : "bad signature", `${what}: event hook ${hook.name} takes deliveries signed with its key (sha256=<HMAC-SHA256 of the raw body>)`,
        "set the webhook's secret on the forge to the --key given to `flow event-hook set`");
    }
    const deliveryId = header(req, GITHUB_DELIVERY_HEADER);
    if (deliveryId === undefined || deliveryId.length > 128) throw new FlowError("invalid_argument", "the X-GitHub-Delivery header is missing or too long: it identifies the delivery, and a redelivery repeats it");
    // Checked only now, after the signature: an unsigned sender learns nothing about its body.
    const shaped = shapeGithubDelivery(hook.name, header(req, GITHUB_EVENT_HEADER) ?? "", assertStorableJson(githubBody(req, raw)));
    if (!shaped.trusted) req.log.info({ hook: hook.name, type: shaped.type, reason: shaped.untrustedReason }, "untrusted delivery: its runs get no secrets or credentials");
    return { type: shaped.type, key: shaped.key ?? null, body: shaped.payload, fields: { ...shaped.fields }, trusted: trustOf({ by: "delivery", trusted: shaped.trusted }), deliveryId };
  };

  /**
   * Verifies the delivery and turns it into an emit; throws the 401/400 a sender should see. A
   * token hook needs its secret; a signed hook needs its signature, and a secret sent along must
   * be the right one (GitHub cannot add headers, so the secret is optional there).
   */
  const toEmit = async (req: FastifyRequest, hook: IngestHook, raw: Buffer, query: URLSearchParams): Promise<EmitInput> => {
    const secret = presentedSecret(req, query);
    if (secret !== undefined && !hookSecretMatches(secret, hook.secretDigest)) {
      throw refused(req, hook.name, "wrong secret", `the secret sent is not the secret of event hook ${hook.name}; ${SECRET_HELP}`, "a rotated secret stops working at once: use the latest one");
    }
    const common = { projectId: hook.projectId, sourceRunId: null, hookName: hook.name, hookRev: hook.rev };
    if (hook.mode === "manifest") {
      const { body, ...shaped } = await githubEmit(req, hook, raw);
      return { ...common, ...shaped, payload: { body, query: queryObject(query) } };
    }
    if (hook.mode === "token" && secret === undefined) throw refused(req, hook.name, "no secret", `no secret was sent; ${SECRET_HELP}`);
    if (hook.mode === "hmac") {
      const ok = await verifyManualHmac({ headerValue: req.headers[hook.hmacHeader!], prefix: hook.hmacPrefix ?? "", key: await openKey(hook), rawBody: raw });
      if (!ok) throw refused(req, hook.name, "bad signature", `the ${hook.hmacHeader} header is missing or does not match the body under event hook ${hook.name}'s key`, `sign the raw body with HMAC-SHA256 and send ${hook.hmacHeader}: ${hook.hmacPrefix ?? ""}<hex>`);
    }
    // Checked only now, after the secret or signature: an unauthenticated sender gets its 401 first.
    return { ...common, type: hook.eventType!, key: null, payload: { body: assertStorableJson(bodyValue(raw)), query: queryObject(query) }, trusted: trustOf({ by: "delivery", trusted: true }) };
  };

  void app.register((scope, _opts, done) => {
    // Every content type arrives as the raw bytes (signatures are over them); 2 MiB, then a 413.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: EMIT_BODY_LIMIT }, (_req, body, done) => done(null, body));
    scope.post("/api/v1/hooks/:org/:project/:name", { bodyLimit: EMIT_BODY_LIMIT }, async (req, reply) => {
      const { org, project, name } = req.params as { org: string; project: string; name: string };
      const qs = req.url.indexOf("?");
      const query = new URLSearchParams(qs < 0 ? "" : req.url.slice(qs + 1));
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      // Verified against the cached hook; if that copy turns out stale at commit, once more against the current one.
      const deliver = async (again: boolean): Promise<{ input: EmitInput; result: EmitResult }> => {
        const hook = await hooks.get(org, project, name);
        if (!hook) throw new FlowError("not_found", `no event hook ${name} in ${org}/${project}`, { hint: "the ingest URL is printed by `flow event-hook set` and `flow event-hook show`" });
        const input = await toEmit(req, hook, raw, query);
        try {
          return { input, result: await committer.submit(input) };
        } catch (err) {
          if (!(err instanceof StaleHookError)) throw err;
          hooks.forget(org, project, name);
          if (again) throw new FlowError("unavailable", `event hook ${name} is being changed; the delivery was not recorded`, { hint: "send it again" });
          return deliver(true);
        }
      };
      const { input, result } = await deliver(false);
      for (const d of result.declined) req.log.info({ eventId: result.eventId, type: input.type, handler: d.handler, err: d.error }, "handler declined the event: its `when` could not be evaluated");
      req.log.debug({ hook: name, eventId: result.eventId, type: input.type, duplicate: result.duplicate }, "hook delivery accepted");
      return reply.status(202).send({ event_id: result.eventId, event_type: input.type });
    });
    done();
  });
};
