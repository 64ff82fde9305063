/**
 * `POST /api/v1/hooks/{org}/{project}/{name}` (spec "Event hook"; SECURITY.md "Event hooks"): no
 * user authentication; the hook's secret or the delivery's signature is the credential. The raw
 * bytes are kept for signatures whatever the content type. The 202 is sent only after the event's
 * transaction committed (group commit).
 */
import { isUtf8 } from "node:buffer";
import type { IncomingHttpHeaders } from "node:http";
import type { FastifyBaseLogger, FastifyPluginCallback, FastifyRequest } from "fastify";
import {
  EMIT_BODY_LIMIT,
  FlowError,
  GITHUB_DELIVERY_HEADER,
  GITHUB_EVENT_HEADER,
  GITHUB_SIGNATURE_HEADER,
  assertStorableJson,
  redactSecretQuery,
  shapeGithubDelivery,
  trustOf,
  verifyGithubSignature,
  verifyManualHmac,
} from "@flowsvc/core";
import {
  GroupCommitter,
  StaleHookError,
  emitBatch,
  hookSealName,
  hookSecretMatches,
  type EmitInput,
  type EmitResult,
  type IngestHook,
  type HookRefusalReason,
  type Keyring,
  type ServiceMetrics,
} from "@flowsvc/store";
import type { HookCache } from "../hook-cache.js";
import type { RouteDeps } from "../deps.js";
import { HOOK_ROUTE, type HookTarget, type ServeDelivery } from "../hook-front.js";
import { toFlowError } from "../errors.js";
import { serveFront } from "../front-io.js";
import { nodeHmacVerifier } from "../hmac.js";
import { api } from "../openapi/route-doc.js";

export const HOOK_SECRET_HEADER = "x-flow-hook-secret";
const SECRET_HELP =
  "send the hook's secret in the X-Flow-Hook-Secret header (or, when headers cannot be set, in the secret query parameter)";

/**
 * Who sent a delivery, as the route reads it: its headers, and its log (the request's child
 * logger, made on first use: a delivery that logs nothing makes none).
 */
interface Sender {
  headers: IncomingHttpHeaders;
  log(): FastifyBaseLogger;
  /** A debug line, only made when debug lines are written. */
  debug(obj: object, msg: string): void;
}

/** The sender's secret: the header, else the `secret` query parameter. */
export const presentedSecret = (req: { headers: IncomingHttpHeaders }, query: URLSearchParams): string | undefined => {
  const h = req.headers[HOOK_SECRET_HEADER];
  return (typeof h === "string" ? h : undefined) ?? query.get("secret") ?? undefined;
};

/** Query values as strings (the first of a repeated name), without the secret. */
export const queryObject = (query: URLSearchParams): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [k, v] of query) if (k !== "secret" && !(k in out)) out[k] = v;
  return out;
};

/**
 * Where the first byte that is not UTF-8 is, in bytes that `isUtf8` refused: the decoder replaces
 * each bad sequence by U+FFFD, and each U+FFFD the bytes do not spell (EF BF BD) is one. Linear:
 * each stretch between two is measured once. Only ever run on a refusal.
 */
const firstNonUtf8Byte = (raw: Buffer): number => {
  const text = raw.toString("utf8");
  let offset = 0;
  for (let from = 0; ;) {
    const at = text.indexOf("\uFFFD", from);
    if (at < 0) return raw.length;
    offset += Buffer.byteLength(text.slice(from, at));
    if (raw[offset] !== 0xef || raw[offset + 1] !== 0xbf || raw[offset + 2] !== 0xbd) return offset;
    offset += 3;
    from = at + 1;
  }
};

/**
 * The body as text, when its bytes are UTF-8 (a BOM is kept, as U+FEFF). A body that is not is
 * refused, saying where: decoded, it would be stored with U+FFFD in place of its bytes, not verbatim.
 */
export const utf8Body = (raw: Buffer): string => {
  if (isUtf8(raw)) return raw.toString("utf8");
  const offset = firstNonUtf8Byte(raw);
  const byte = (raw[offset] ?? 0).toString(16).padStart(2, "0");
  throw new FlowError(
    "invalid_argument",
    `body is not valid UTF-8 at byte offset ${offset} (0x${byte}): a delivery is kept as JSON or text, which cannot hold these bytes verbatim`,
    { hint: "send the body as UTF-8 (binary data encoded, e.g. as base64)", details: { offset } },
  );
};

/**
 * A JSON body keeps its types, an empty body is `{}`, any other UTF-8 text arrives verbatim as a
 * string; a body that is not UTF-8 is a 400 (utf8Body). Run only after the secret or signature.
 */
export const bodyValue = (raw: Buffer): unknown => {
  if (raw.length === 0) return {};
  const text = utf8Body(raw);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
};

/**
 * The first `payload` field of a form, its escapes decoded strictly: `%XX` bytes that are not UTF-8
 * are refused, where URLSearchParams would have put U+FFFD in their place.
 */
const formPayload = (form: string): string => {
  for (const piece of form.split("&")) {
    const eq = piece.indexOf("=");
    if ((eq < 0 ? piece : piece.slice(0, eq)) !== "payload") continue;
    try {
      return eq < 0 ? "" : decodeURIComponent(piece.slice(eq + 1).replaceAll("+", " "));
    } catch {
      throw new FlowError(
        "invalid_argument",
        "body: the form's payload field is not valid percent-encoding (% takes two hex digits, and the bytes must be UTF-8)",
      );
    }
  }
  return "";
};

/** GitHub's form content type sends the JSON as the `payload` field. */
const githubBody = (req: Sender, raw: Buffer): unknown => {
  const type = String(req.headers["content-type"] ?? "")
    .split(";")[0]!
    .trim()
    .toLowerCase();
  const text = type === "application/x-www-form-urlencoded" ? formPayload(utf8Body(raw)) : utf8Body(raw);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new FlowError("invalid_argument", "the GitHub delivery's body is not JSON");
  }
};

const header = (req: Sender, name: string): string | undefined => {
  const v = req.headers[name];
  return typeof v === "string" && v !== "" ? v : undefined;
};

/** Why each 401 was refused, for the log and the refusal counter (a bounded reason; the hook's name only in the log). */
const refusals = new WeakMap<object, { hook: string; reason: HookRefusalReason }>();

/** The 401 a sender gets, with why (logged by the plugin's onError, once it is the answer). */
const refused = (hook: string, reason: HookRefusalReason, answer: { message: string; hint?: string }): FlowError => {
  const err = new FlowError("unauthenticated", answer.message, answer.hint ? { hint: answer.hint } : {});
  refusals.set(err, { hook, reason });
  return err;
};

const openKey = (keyring: Keyring, hook: IngestHook): Promise<string> =>
  keyring.open(
    hook.orgId,
    { org: hook.orgId, project: hook.projectId, kind: "credential", name: hookSealName(hook.name) },
    hook.keySealed!,
  );

/** The query of a delivery URL without one (only ever read). */
const NO_QUERY: URLSearchParams = new URLSearchParams();

/** One delivery as it arrived: the raw body and the query. */
interface Delivery {
  raw: Buffer;
  query: URLSearchParams;
}

type GithubEmit = Omit<EmitInput, "projectId" | "sourceRunId" | "hookName" | "payload"> & { body: unknown };

/** A GitHub delivery: signature over the raw bytes, then shaped by the manifest; dedup on its delivery id. */
const githubEmit = async (keyring: Keyring, req: Sender, hook: IngestHook, raw: Buffer): Promise<GithubEmit> => {
  const signature = req.headers[GITHUB_SIGNATURE_HEADER];
  if (!(await verifyGithubSignature(await openKey(keyring, hook), raw, signature, nodeHmacVerifier))) {
    const what =
      signature === undefined
        ? "the delivery has no X-Hub-Signature-256 header"
        : "the X-Hub-Signature-256 signature does not match the body";
    throw refused(hook.name, signature === undefined ? "no_signature" : "bad_signature", {
      message: `${what}: event hook ${hook.name} takes deliveries signed with its key (sha256=<HMAC-SHA256 of the raw body>)`,
      hint: "set the webhook's secret on the forge to the --key given to `flow event-hook set`",
    });
  }
  const deliveryId = header(req, GITHUB_DELIVERY_HEADER);
  if (deliveryId === undefined || deliveryId.length > 128)
    throw new FlowError(
      "invalid_argument",
      "the X-GitHub-Delivery header is missing or too long: it identifies the delivery, and a redelivery repeats it",
    );
  // Checked only now, after the signature: an unsigned sender learns nothing about its body.
  const shaped = shapeGithubDelivery(hook.name, header(req, GITHUB_EVENT_HEADER) ?? "", assertStorableJson(githubBody(req, raw)));
  if (!shaped.trusted)
    req
      .log()
      .info(
        { hook: hook.name, type: shaped.type, reason: shaped.untrustedReason },
        "untrusted delivery: its runs get no secrets or credentials",
      );
  return {
    type: shaped.type,
    key: shaped.key ?? null,
    body: shaped.payload,
    fields: { ...shaped.fields },
    trusted: trustOf({ by: "delivery", trusted: shaped.trusted }),
    deliveryId,
  };
};

/** A manual HMAC hook's check: its header holds the prefix and the HMAC-SHA256 of the raw body under its key. */
const checkManualHmac = async (keyring: Keyring, req: Sender, hook: IngestHook, raw: Buffer): Promise<void> => {
  const ok = await verifyManualHmac({
    headerValue: req.headers[hook.hmacHeader!],
    prefix: hook.hmacPrefix ?? "",
    key: await openKey(keyring, hook),
    rawBody: raw,
    verify: nodeHmacVerifier,
  });
  if (!ok) {
    throw refused(hook.name, "bad_signature", {
      message: `the ${hook.hmacHeader} header is missing or does not match the body under event hook ${hook.name}'s key`,
      hint: `sign the raw body with HMAC-SHA256 and send ${hook.hmacHeader}: ${hook.hmacPrefix ?? ""}<hex>`,
    });
  }
};

/**
 * Verifies the delivery and turns it into an emit; throws the 401/400 a sender should see. A
 * token hook needs its secret; a signed hook needs its signature, and a secret sent along must
 * be the right one (GitHub cannot add headers, so the secret is optional there).
 */
const toEmit = async (keyring: Keyring, req: Sender, hook: IngestHook, { raw, query }: Delivery): Promise<EmitInput> => {
  const secret = presentedSecret(req, query);
  if (secret !== undefined && !hookSecretMatches(secret, hook.secretDigest)) {
    throw refused(hook.name, "wrong_secret", {
      message: `the secret sent is not the secret of event hook ${hook.name}; ${SECRET_HELP}`,
      hint: "a rotated secret stops working at once: use the latest one",
    });
  }
  const common = { projectId: hook.projectId, sourceRunId: null, hookName: hook.name, hookRev: hook.rev };
  if (hook.mode === "manifest") {
    const { body, ...shaped } = await githubEmit(keyring, req, hook, raw);
    return { ...common, ...shaped, payload: { body, query: queryObject(query) } };
  }
  if (hook.mode === "token" && secret === undefined)
    throw refused(hook.name, "no_secret", { message: `no secret was sent; ${SECRET_HELP}` });
  if (hook.mode === "hmac") await checkManualHmac(keyring, req, hook, raw);
  // Checked only now, after the secret or signature: an unauthenticated sender gets its 401 first.
  return {
    ...common,
    type: hook.eventType!,
    key: null,
    payload: { body: assertStorableJson(bodyValue(raw)), query: queryObject(query) },
    trusted: trustOf({ by: "delivery", trusted: true }),
  };
};

/** What delivering needs: the keyring, the hook cache and the group committer. */
interface IngestCtx {
  keyring: Keyring;
  hooks: HookCache;
  committer: GroupCommitter<EmitInput, EmitResult>;
}

/** Verified against the cached hook; if that copy turns out stale at commit, once more against the current one. */
const deliver = async (
  ctx: IngestCtx,
  req: Sender,
  delivery: Delivery & HookTarget,
  again = false,
): Promise<{ input: EmitInput; result: EmitResult }> => {
  const { org, project, name } = delivery;
  // A hit costs no promise: the common case, every delivery after a hook's first.
  const copy = ctx.hooks.cached(org, project, name);
  const cached = copy !== undefined;
  const hook = copy ?? (await ctx.hooks.get(org, project, name));
  if (!hook)
    throw new FlowError("not_found", `no event hook ${name} in ${org}/${project}`, {
      hint: "the ingest URL is printed by `flow event-hook set` and `flow event-hook show`",
    });
  let input: EmitInput;
  try {
    input = await toEmit(ctx.keyring, req, hook, delivery);
  } catch (err) {
    // The copy in memory may predate a rotation on another replica: refused, it is read again.
    if (!cached || !refusals.has(err as object)) throw err;
    ctx.hooks.forget(org, project, name);
    return deliver(ctx, req, delivery, again);
  }
  try {
    return { input, result: await ctx.committer.submit(input) };
  } catch (err) {
    if (!(err instanceof StaleHookError)) throw err;
    ctx.hooks.forget(org, project, name);
    if (again)
      throw new FlowError("unavailable", `event hook ${name} is being changed; the delivery was not recorded`, { hint: "send it again" });
    return deliver(ctx, req, delivery, true);
  }
};

/** A committed delivery's counters and log lines, once its 202 is written. */
const delivered = (
  metrics: ServiceMetrics,
  sender: Sender,
  name: string,
  { input, result }: { input: EmitInput; result: EmitResult },
): void => {
  metrics.hookDeliveries.inc({ outcome: result.duplicate ? "duplicate" : "recorded" });
  metrics.handlersDelivered(result);
  // The reason is the error's (its `when` did not evaluate, its stored graph is gone, ...), as on the emit route.
  for (const d of result.declined)
    sender.log().info({ eventId: result.eventId, type: input.type, handler: d.handler, err: d.error }, "handler declined the event");
  sender.debug({ hook: name, eventId: result.eventId, type: input.type, duplicate: result.duplicate }, "hook delivery accepted");
};

/** A refused delivery's log line (a 401's reason) and its refusal counter, by reason or error code. */
const countRefusal = (
  { metrics, sender, url }: { metrics: ServiceMetrics; sender: Sender; url: string },
  err: unknown,
  code: () => string,
): void => {
  const refusal = refusals.get(err as object);
  if (refusal) sender.log().info({ ...refusal, url: redactSecretQuery(url) }, "hook delivery refused");
  metrics.hookRefused(refusal?.reason ?? code());
};

/**
 * The route served from a plain socket request (hook-front.ts): what Fastify's chain does for it,
 * with the same code (front-io.ts serveFront): the body, the delivery, the 202 or the error's
 * answer, the refusal's line and counter, the HTTP metrics.
 */
const serveDelivery = (ctx: IngestCtx, { metrics, logger }: { metrics: ServiceMetrics; logger: FastifyBaseLogger }): ServeDelivery => {
  const debugs = logger.level === "debug" || logger.level === "trace";
  return (req, res, { target, query }) =>
    serveFront<Buffer, Awaited<ReturnType<typeof deliver>>>(req, res, {
      metrics,
      route: (id) => {
        let child: FastifyBaseLogger | undefined;
        const log = (): FastifyBaseLogger => (child ??= logger.child({ requestId: id }));
        const sender: Sender = { headers: req.headers, log, debug: (o, msg) => debugs && log().debug(o, msg) };
        return {
          route: HOOK_ROUTE,
          log,
          parse: (raw: Buffer) => raw,
          handle: (raw: Buffer) =>
            deliver(ctx, sender, { ...target, raw, query: query === undefined ? NO_QUERY : new URLSearchParams(query) }),
          ok: (done) => ({ status: 202, payload: { event_id: done.result.eventId, event_type: done.input.type } }),
          afterOk: (done) => delivered(metrics, sender, target.name, done),
          refused: (err, code) => countRefusal({ metrics, sender, url: req.url ?? "" }, err, () => code),
        };
      },
    });
};

/** The delivery route, in a plugin of its own: every content type arrives as the raw bytes (signatures are over them); 2 MiB, then a 413. */
export const hookIngestRoutes: FastifyPluginCallback<{ deps: RouteDeps; hooks: HookCache }> = (app, { deps, hooks }, done) => {
  // A redelivery racing its first delivery in another batch waits on the unique index and then
  // answers the first one's event (emitEvents), so no retry is needed here.
  const committer = new GroupCommitter<EmitInput, EmitResult>(deps.pool, emitBatch.apply, {
    begin: emitBatch.begin,
    alone: emitBatch.alone,
  });
  app.addHook("onClose", () => committer.close());
  const ctx: IngestCtx = { keyring: deps.keyring, hooks, committer };
  const { metrics } = deps;
  // A plain delivery from a socket skips Fastify (hook-front.ts) and is served by the same code as below.
  deps.hookFront?.install(serveDelivery(ctx, { metrics, logger: app.log }));
  const senderOf = (req: FastifyRequest): Sender => ({
    headers: req.headers,
    log: () => req.log,
    debug: (o, msg) => req.log.debug(o, msg),
  });
  // Every refusal is counted, by reason or error code: the body parser's 413 as much as a bad signature.
  app.addHook("onError", (req, _reply, err, next) => {
    countRefusal({ metrics, sender: senderOf(req), url: req.url }, err, () => toFlowError(err, req).code);
    next();
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: EMIT_BODY_LIMIT }, (_req, body, parsed) => parsed(null, body));
  const doc = api({
    summary: "Deliver an event to a hook; 202 once it is committed",
    description:
      "Any content type: the raw bytes are what a signature covers. They must be UTF-8 (else a 400 naming the first bad byte's offset, after the secret or signature): JSON bodies keep their types, other text arrives as a string.",
    tag: "event-hooks",
    auth: "hook",
    body: {},
    bodyType: "*/*",
    response: { status: 202, description: "`{event_id, event_type}`" },
  });
  app.post(HOOK_ROUTE, { bodyLimit: EMIT_BODY_LIMIT, ...doc }, async (req, reply) => {
    const target = req.params as HookTarget;
    const qs = req.url.indexOf("?");
    const query = qs < 0 ? NO_QUERY : new URLSearchParams(req.url.slice(qs + 1));
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const sender = senderOf(req);
    const done = await deliver(ctx, sender, { ...target, raw, query });
    // The 202 first: a lone sender waits for it, and the rest is bookkeeping (it runs in the same
    // turn of the event loop, so no request can see the counters before they moved).
    void reply.status(202).send({ event_id: done.result.eventId, event_type: done.input.type });
    delivered(metrics, sender, target.name, done);
    return reply;
  });
  done();
};
