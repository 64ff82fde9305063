// Helpers over an object's metadata, and the name rules the apiserver validates.
import { randomBytes } from "node:crypto";
import type { KubeObject } from "./api-error.js";

export type Meta = Record<string, unknown> & {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
};

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** The value as an object (an empty one if it is not a plain object). */
export const rec = (v: unknown): Record<string, unknown> =>
  v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

/** A scalar as text ("" for anything else). */
export const str = (v: unknown): string => (typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : "");

export const metaOf = (obj: KubeObject): Meta => {
  if (!obj.metadata || typeof obj.metadata !== "object") obj.metadata = {};
  return obj.metadata;
};

/** RFC 3339 with second precision, as metav1.Time serialises. */
export const timestamp = (ms = Date.now()): string => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");

const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** A DNS-1123 subdomain (most names) or, with `label`, a DNS-1123 label (namespaces). Returns the problem. */
export const nameProblem = (name: string, label: boolean): string | undefined => {
  if (label && (!LABEL.test(name) || name.length > 63)) {
    return `Invalid value: "${name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character`;
  }
  if (!SUBDOMAIN.test(name) || name.length > 253) {
    return `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`;
  }
  return undefined;
};

const ALNUM = "bcdfghjklmnpqrstvwxz2456789";

/** generateName's random suffix: five characters from the apiserver's alphabet. */
export const randomSuffix = (): string => [...randomBytes(5)].map((b) => ALNUM[b % ALNUM.length]).join("");

/** The object without what changes on every write, to tell a no-op write from a change. */
export const comparable = (obj: KubeObject): unknown => {
  const { metadata, ...rest } = obj;
  const { resourceVersion: _rv, managedFields: _mf, ...meta } = (metadata ?? {}) as Meta;
  return { ...rest, metadata: meta };
};

/** JSON with object keys sorted, so that two equal objects built in a different order compare equal. */
export const canonicalJson = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );

export const sameJson = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);
