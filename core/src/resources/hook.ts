// An inbound event hook (spec "Event hook"): the API's PUT body, a FlowEventHook's spec, and the
// one function that turns a body into a hook's configuration plus its signing key. A hook's spec
// (what it accepts and emits) is separate from its secret material (the shared secret, minted or
// given, and the signing key): a writer passes both to the ResourceStore, which keeps the material
// out of the spec (sealed or digested in Postgres; never in a custom resource).
import { z } from "zod";
import { FlowError } from "../errors.js";
import { EVENT_TYPE_JSON_SCHEMA, assertEmittable, isReservedType } from "../events.js";
import { SecretKeyRef } from "./refs.js";

/** A hook's name routes its events (`<hook>.<forge event>`), so it must be a valid, non-platform type prefix. */
export const HOOK_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$/;
/** An HTTP header name (RFC 9110 token). */
export const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;

export const HOOK_MODES = ["token", "manifest", "hmac"] as const;
export type HookMode = (typeof HOOK_MODES)[number];

/** The built-in manifests. Only GitHub's exists. */
export const HOOK_MANIFESTS = ["github"] as const;
export type HookManifest = (typeof HOOK_MANIFESTS)[number];

export const HookName = z
  .string()
  .regex(HOOK_NAME, "a hook name is 1-40 of A-Z a-z 0-9 . _ -, starting with a letter or digit")
  .refine(
    (n) => !isReservedType(n) && !isReservedType(`${n}.x`),
    "a hook name may not be a platform type or namespace (push, manual, spawn, schedule.tick, run, flow)",
  );

/** What a hook accepts and emits, without secret material: shared by the API body and the CR spec. */
const hookFields = {
  event_type: z
    .string()
    .optional()
    .describe("The event type a shared-token or manual-HMAC hook emits (default for HMAC: the hook's name)."),
  manifest: z
    .string()
    .optional()
    .describe("A built-in manifest (github): verifies the forge's signature and derives each delivery's type."),
  hmac_header: z
    .string()
    .regex(HEADER_NAME, "hmac_header must be an HTTP header name")
    .optional()
    .describe("Manual HMAC: the header carrying the hex HMAC-SHA256 of the body."),
  hmac_prefix: z.string().max(64).optional().describe("Manual HMAC: a prefix before the hex digest (e.g. sha256=)."),
};

/**
 * The body of `PUT .../event-hooks/{name}`: the fields plus the signing key in the clear (it is sealed at once).
 * The event type's and the manifest's rules are parseHook's; the API's description says them too (meta).
 */
export const HookSetBody = z
  .object({
    ...hookFields,
    event_type: hookFields.event_type.meta({ ...EVENT_TYPE_JSON_SCHEMA }),
    manifest: hookFields.manifest.meta({ enum: [...HOOK_MANIFESTS] }),
    key: z.string().min(1, "key is empty").max(4096).optional(),
    hmac_key: z.string().min(1, "hmac_key is empty").max(4096).optional(),
  })
  .strict();
export type HookSetBody = z.infer<typeof HookSetBody>;

/**
 * A FlowEventHook's spec: the same fields, but no value. `secretRef` names the Secret key holding
 * the shared secret (else one is minted and shown once); `signingKeyRef` the one holding the
 * signing key of a manifest or manual-HMAC hook (the API body's `key` / `hmac_key`).
 */
export const HookResourceSpec = z
  .object({
    ...hookFields,
    secretRef: SecretKeyRef.optional().describe("A key of a Secret in this namespace holding the shared secret; without it one is minted."),
    signingKeyRef: SecretKeyRef.optional().describe(
      "A key of a Secret in this namespace holding the signing key (manifest and manual-HMAC hooks).",
    ),
  })
  .strict();
export type HookResourceSpec = z.infer<typeof HookResourceSpec>;

/** A hook's configuration: what it accepts and emits, never its secret or key. */
export interface HookSpec {
  mode: HookMode;
  /** The type a token or manual-HMAC hook emits; null for a manifest hook (it derives one per delivery). */
  eventType: string | null;
  manifest: HookManifest | null;
  /** Lower-case header name (manual HMAC). */
  hmacHeader: string | null;
  hmacPrefix: string | null;
}

/** A parsed hook: its spec and, for a manifest or manual-HMAC hook, its signing key in the clear. */
export interface HookSetup {
  spec: HookSpec;
  signingKey: string | null;
}

/** What management answers show: never the secret, never the key. */
export interface HookRecord {
  name: string;
  mode: HookMode;
  event_type: string | null;
  manifest: string | null;
  hmac_header: string | null;
  hmac_prefix: string | null;
  created_at: string;
  rotated_at: string | null;
}

const refuse = (message: string): never => {
  throw new FlowError("invalid_argument", message, { hint: "see `flow event-hook set --help`" });
};

const manifestSetup = (name: string, b: HookSetBody & { manifest: string }, hmac: boolean): HookSetup => {
  if (hmac) refuse("give either --manifest or --hmac-header/--hmac-key, not both");
  if (b.event_type !== undefined) refuse(`a manifest hook derives each delivery's type (${name}.<event>); leave out --event-type`);
  if (!(HOOK_MANIFESTS as readonly string[]).includes(b.manifest))
    refuse(`unknown manifest "${b.manifest}"; the built-in manifests are: ${HOOK_MANIFESTS.join(", ")}`);
  if (b.key === undefined) refuse(`--manifest ${b.manifest} needs --key <signing_key>: the secret the forge signs deliveries with`);
  return {
    spec: { mode: "manifest", eventType: null, manifest: b.manifest as HookManifest, hmacHeader: null, hmacPrefix: null },
    signingKey: b.key!,
  };
};

const hmacSetup = (name: string, b: HookSetBody): HookSetup => {
  if (b.hmac_header === undefined || b.hmac_key === undefined)
    refuse("a manual HMAC hook needs both --hmac-header and --hmac-key (--hmac-prefix is optional)");
  // Without --event-type a manual HMAC hook emits its own name as the type.
  const eventType = b.event_type === undefined ? name : assertEmittable(b.event_type);
  return {
    spec: { mode: "hmac", eventType, manifest: null, hmacHeader: b.hmac_header!.toLowerCase(), hmacPrefix: b.hmac_prefix ?? "" },
    signingKey: b.hmac_key!,
  };
};

/**
 * The mode a body asks for, checked for a complete and unambiguous combination (a ZodError names a
 * bad field's path; a FlowError says which flags conflict or are missing).
 */
export const parseHook = (name: string, body: unknown): HookSetup => {
  HookName.parse(name);
  const b = HookSetBody.parse(body ?? {});
  const hmac = b.hmac_header !== undefined || b.hmac_key !== undefined || b.hmac_prefix !== undefined;
  if (b.manifest !== undefined) return manifestSetup(name, { ...b, manifest: b.manifest }, hmac);
  if (b.key !== undefined) refuse("--key goes with --manifest; a manual HMAC hook takes --hmac-key");
  if (hmac) return hmacSetup(name, b);
  if (b.event_type === undefined)
    refuse("give --event-type <type> (shared token), --manifest <m> --key <k>, or --hmac-header <h> --hmac-key <k>");
  return {
    spec: { mode: "token", eventType: assertEmittable(b.event_type!), manifest: null, hmacHeader: null, hmacPrefix: null },
    signingKey: null,
  };
};

/** A FlowEventHook's spec, checked by the API's rules: the refs stand for the values they point at. */
export interface HookResourceSetup {
  spec: HookSpec;
  /** Where the shared secret comes from; null: minted (and kept) by flowsvc. */
  secretRef: SecretKeyRef | null;
  /** Where a manifest or manual-HMAC hook's signing key comes from; null for a token hook, or when `keyKept`. */
  signingKeyRef: SecretKeyRef | null;
}

/** parseHook's flags as a FlowEventHook's fields, in this order (longest spellings first). */
const AS_FIELDS: ReadonlyArray<readonly [RegExp, string]> = [
  [/--key goes with --manifest; a manual HMAC hook takes --hmac-key/g, "spec.signingKeyRef goes with spec.manifest or spec.hmac_header"],
  [/--manifest <m> --key <k>/g, "spec.manifest with spec.signingKeyRef"],
  [/--hmac-header <h> --hmac-key <k>/g, "spec.hmac_header with spec.signingKeyRef"],
  [/--hmac-header\/--hmac-key/g, "spec.hmac_header/spec.hmac_prefix"],
  [/ <(type|m|h|k|signing_key)>/g, ""],
  [/--hmac-header/g, "spec.hmac_header"],
  [/--hmac-prefix/g, "spec.hmac_prefix"],
  [/--hmac-key/g, "spec.signingKeyRef"],
  [/--manifest/g, "spec.manifest"],
  [/--event-type/g, "spec.event_type"],
  [/--key/g, "spec.signingKeyRef"],
];

/** parseHook for a FlowEventHook: its refusals name the spec's fields, not `flow event-hook set`'s flags. */
const parseHookAsResource = (name: string, body: HookSetBody): HookSetup => {
  try {
    return parseHook(name, body);
  } catch (err) {
    if (!(err instanceof FlowError)) throw err;
    const message = AS_FIELDS.reduce((m, [flag, field]) => m.replace(flag, field), err.message);
    throw new FlowError(err.code, message, { hint: "see `kubectl explain floweventhook.spec`", cause: err });
  }
};

/**
 * Parses a FlowEventHook's spec with parseHook's rules (the API's, its messages naming the spec's fields). A manifest
 * or manual-HMAC hook needs a signingKeyRef unless `keyKept` (its key was set through the API and is
 * already sealed in Postgres). Values are never read here: the reconciler reads the refs.
 */
export const parseHookResource = (name: string, raw: unknown, keyKept = false): HookResourceSetup => {
  const { secretRef, signingKeyRef, ...fields } = HookResourceSpec.parse(raw ?? {});
  const hmac = fields.hmac_header !== undefined || fields.hmac_prefix !== undefined;
  const keyed = hmac || fields.manifest !== undefined;
  // A stand-in for the key, so that parseHook checks the combination; the real one is behind the ref.
  const key = signingKeyRef !== undefined || (keyKept && keyed) ? "(signingKeyRef)" : undefined;
  const body: HookSetBody = hmac ? { ...fields, hmac_key: key } : { ...fields, key };
  const { spec } = parseHookAsResource(name, body);
  return { spec, secretRef: secretRef ?? null, signingKeyRef: spec.mode === "token" ? null : (signingKeyRef ?? null) };
};

/** The FlowEventHook spec that stands for a hook's configuration (no secret material: refs, if any, are the caller's). */
export const hookResourceSpecOf = (spec: HookSpec): HookResourceSpec => ({
  ...(spec.mode === "manifest" ? {} : { event_type: spec.eventType ?? undefined }),
  ...(spec.manifest === null ? {} : { manifest: spec.manifest }),
  ...(spec.hmacHeader === null ? {} : { hmac_header: spec.hmacHeader }),
  ...(spec.hmacPrefix === null ? {} : { hmac_prefix: spec.hmacPrefix }),
});

/** Where senders post a hook's deliveries: `<base>/api/v1/hooks/<org>/<project>/<name>`, each part percent-encoded. */
export const hookIngestUrl = (baseUrl: string, org: string, project: string, name: string): string =>
  `${baseUrl.replace(/\/+$/, "")}/api/v1/hooks/${[org, project, name].map(encodeURIComponent).join("/")}`;
