// A project secret's metadata (spec "Secret"): the API's PUT body, a FlowSecret's spec (a reference
// to a Kubernetes Secret, never a value), and what answers show. The name and value rules are
// core/src/secret-rules.ts (assertSecretName, assertSecretValue).
import { z } from "zod";
import { assertSecretName, assertSecretValue } from "../secret-rules.js";
import { SecretKeyRef } from "./refs.js";

// The value's rules (NUL, lone surrogates, size) are assertSecretValue's, whose messages never quote it.
export const SecretSetBody = z.object({ value: z.string({ error: "the value must be a JSON string" }) }).strict();

/**
 * A FlowSecret's spec: where its value comes from. With `valueFrom.secretKeyRef` the controller
 * reads that Kubernetes Secret and seals the value into Postgres; without it the value is set
 * through the API or CLI and only `status.setAt` shows it exists.
 */
export const SecretResourceSpec = z
  .object({
    valueFrom: z.object({ secretKeyRef: SecretKeyRef }).strict().optional(),
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
