// A credential as a declarative resource (spec "Credential"; issue 16 "No secret value in etcd"):
// a FlowCredential's spec and the one function that turns it, with the values read from the
// Kubernetes Secrets it names, into the body core's parseCredentialValue checks. The spec never
// holds a value: the token / key / password comes from `valueFrom.secretKeyRef`, or is set through
// the API or CLI (then the spec says only the kind and `status.setAt` shows it was set). The
// credential rules themselves (kinds, names, fields) are core/src/credentials/kinds.ts.
import { z } from "zod";
import {
  CLI_CREDENTIAL_KINDS,
  CLI_KIND_SPELLINGS,
  CREDENTIAL_HEADER_MAX,
  CREDENTIAL_USERNAME_MAX,
  credentialFieldProblem,
  parseCredentialKind,
  type CredentialKind,
} from "../credentials/kinds.js";
import { SecretKeyRef } from "./refs.js";

const ValueFrom = z.object({ secretKeyRef: SecretKeyRef }).strict();

type Ctx = z.core.$RefinementCtx<unknown>;
const issue = (ctx: Ctx, path: string, message: string): void => ctx.addIssue({ code: "custom", path: [path], message });

type Fields = { kind: string; header?: string; username?: string; usernameFrom?: unknown; valueFrom?: unknown };

/** Each optional field only with its kind, and only beside valueFrom; username or usernameFrom, not both. */
const checkPlacement = (s: Fields, ctx: Ctx): void => {
  const fed = s.valueFrom !== undefined;
  const fieldsOf: Record<string, string> = { header: "api-key", username: "basic", usernameFrom: "basic" };
  for (const [field, kind] of Object.entries(fieldsOf)) {
    if ((s as Record<string, unknown>)[field] === undefined) continue;
    if (s.kind !== kind) issue(ctx, field, `only a ${kind} credential has ${field}; this one is ${s.kind}`);
    else if (!fed) issue(ctx, field, "goes with valueFrom: a credential set through the API gets its fields with its value");
  }
  if (s.username !== undefined && s.usernameFrom !== undefined) issue(ctx, "usernameFrom", "give username or usernameFrom, not both");
};

/** The plain fields by the credential rules, and the fields a Secret-fed credential needs. */
const checkValues = (s: Fields, ctx: Ctx): void => {
  for (const field of ["header", "username"] as const) {
    const problem = s[field] === undefined ? undefined : credentialFieldProblem(field, s[field]);
    if (problem !== undefined) issue(ctx, field, problem.slice(field.length + 2));
  }
  if (s.valueFrom === undefined) return;
  if (s.kind === "api-key" && s.header === undefined) issue(ctx, "header", "required for an api-key credential fed by valueFrom");
  if (s.kind === "basic" && s.username === undefined && s.usernameFrom === undefined)
    issue(ctx, "username", "a basic credential fed by valueFrom needs username or usernameFrom");
};

/** The cross-field rules of a spec. */
const checkFields = (s: Fields, ctx: Ctx): void => {
  checkPlacement(s, ctx);
  checkValues(s, ctx);
};

/**
 * A FlowCredential's spec. With `valueFrom.secretKeyRef` the controller reads the value (a basic
 * credential's password) from that Kubernetes Secret and seals it into Postgres, again whenever the
 * Secret changes; without it the value is set with `flow credential set` and only `status.setAt`
 * shows it exists.
 */
export const CredentialResourceSpec = z
  .object({
    kind: z.enum(CLI_CREDENTIAL_KINDS).describe("bearer, api-key, basic or url-token."),
    header: z
      .string()
      .max(CREDENTIAL_HEADER_MAX)
      .optional()
      .describe("api-key with valueFrom: the header the key is sent in (e.g. X-Api-Key)."),
    username: z.string().max(CREDENTIAL_USERNAME_MAX).optional().describe("basic with valueFrom: the username, in the clear."),
    usernameFrom: ValueFrom.optional().describe("basic with valueFrom: the key of a Secret in this namespace holding the username."),
    valueFrom: ValueFrom.optional().describe(
      "The key of a Secret in this namespace holding the token, key or (basic) password; without it the value is set through the API.",
    ),
  })
  .strict()
  .superRefine(checkFields);
export type CredentialResourceSpec = z.infer<typeof CredentialResourceSpec>;

/** What answers show of a credential: name, kind and when it was set; never a value, nor any field. */
export interface CredentialMeta {
  name: string;
  kind: CredentialKind;
  set_at: string;
}

/** The stored kind of a spec's kind. */
export const credentialKindOfResource = (spec: CredentialResourceSpec): CredentialKind => parseCredentialKind(spec.kind)!;

/** The spec of the FlowCredential the API writes for a credential it set: its kind, nothing else. */
export const credentialResourceSpecOf = (kind: CredentialKind): CredentialResourceSpec => ({
  kind: CLI_KIND_SPELLINGS[kind],
});

/**
 * The body of a credential fed by Secrets, as `PUT .../credentials/<name>` takes it: the spec's
 * kind and plain fields, the value read from `valueFrom` (the token, the key, or basic's password)
 * and basic's username read from `usernameFrom` when the spec names one. parseCredentialValue then
 * checks it whole.
 */
export const credentialBodyOfResource = (
  spec: CredentialResourceSpec,
  read: { value: string; username?: string },
): Record<string, string> => {
  const kind = credentialKindOfResource(spec);
  const body: Record<string, string> = { kind };
  if (kind === "api_key") Object.assign(body, { header: spec.header ?? "", value: read.value });
  else if (kind === "basic") Object.assign(body, { username: read.username ?? spec.username ?? "", password: read.value });
  else body["token"] = read.value;
  return body;
};
