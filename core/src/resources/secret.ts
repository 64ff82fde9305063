// A project secret's metadata (spec "Secret"): the API's PUT body, a FlowSecret's spec (a reference
// to a Kubernetes Secret, never a value), and what answers show. The name and value rules are
// core/src/secret-rules.ts (assertSecretName, assertSecretValue).
import { z } from "zod";
import { SECRET_VALUE_JSON_SCHEMA, assertSecretName, assertSecretValue } from "../secret-rules.js";
import { KUBE_NAME, SecretKeyRef } from "./refs.js";

// The value's rules (empty, NUL, lone surrogates, size) are assertSecretValue's, whose messages never quote it; the API's
// description says them too (meta: what JSON Schema can say of them).
export const SecretSetBody = z
  .object({ value: z.string({ error: "the value must be a JSON string" }).meta({ ...SECRET_VALUE_JSON_SCHEMA }) })
  .strict();

/**
 * A FlowSecret's spec: where its value comes from. With `valueFrom.secretKeyRef` the controller
 * reads that Kubernetes Secret and seals the value into Postgres; without it the value is set
 * through the API or CLI and only `status.setAt` shows it exists.
 */
export const SecretResourceSpec = z
  .object({
    secretName: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .describe("The secret's name in flowsvc (an environment variable name); default: metadata.name upper-cased, - as _."),
    valueFrom: z
      .object({ secretKeyRef: SecretKeyRef })
      .strict()
      .optional()
      .describe(
        "The key of a Kubernetes Secret in this namespace the controller reads and seals; without it the value is set through the API.",
      ),
  })
  .strict();
export type SecretResourceSpec = z.infer<typeof SecretResourceSpec>;

/** What answers show of a secret: its name and when it was set, never its value. */
export interface SecretMeta {
  name: string;
  set_at: string;
}

/** A secret's value from an API body, with the name's and the value's rules checked (messages never quote the value). */
export const parseSecretValue = (name: string, body: unknown): string => {
  assertSecretName(name);
  const { value } = SecretSetBody.parse(body);
  assertSecretValue(name, value);
  return value;
};

/** The flowsvc secret a FlowSecret stands for: spec.secretName, else `api-token` -> `API_TOKEN`. */
export const secretNameOfResource = (metadataName: string, spec: SecretResourceSpec): string =>
  spec.secretName ?? metadataName.toUpperCase().replaceAll("-", "_");

/** FNV-1a, 32 bits, hex: a short stable suffix (not a security property). */
const fnv = (s: string): string => {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
};

/**
 * The FlowSecret that stands for a flowsvc secret (what the Kubernetes ResourceStore writes):
 * `API_TOKEN` -> metadata.name `api-token`; a name that does not map back (mixed case, a leading _)
 * gets a derived metadata.name with a hash suffix and spec.secretName.
 */
export const resourceOfSecretName = (name: string): { metadataName: string; secretName?: string } => {
  const derived = name.toLowerCase().replaceAll("_", "-");
  if (KUBE_NAME.test(derived) && derived.length <= 63 && secretNameOfResource(derived, {}) === name) return { metadataName: derived };
  const base =
    derived
      .replace(/[^a-z0-9-]/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 40) || "secret";
  return { metadataName: `${base}-${fnv(name)}`, secretName: name };
};
