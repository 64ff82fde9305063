// Request bodies: JSON for most verbs, YAML for server-side apply (application/apply-patch+yaml).
import type { IncomingMessage } from "node:http";
import { badRequest, ApiError, type KubeObject } from "./api-error.js";

const MAX_BODY = 3 * 1024 * 1024;

/**
 * The body as text. Past 3 MiB (the apiserver's limit) the rest is read and dropped, then 413: a
 * client still writing would otherwise get EPIPE instead of the answer.
 */
export const readBody = async (req: IncomingMessage): Promise<string> => {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size <= MAX_BODY) chunks.push(chunk as Buffer);
  }
  if (size > MAX_BODY) throw new ApiError(413, "RequestEntityTooLarge", `Request entity too large: limit is ${MAX_BODY}`);
  return Buffer.concat(chunks).toString("utf8");
};

export const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest(`the body of the request could not be decoded: ${(err as Error).message}`);
  }
};

/**
 * A JSON object body; with `yaml` (server-side apply) YAML too. kubectl and client-node send apply
 * bodies as JSON, which is YAML; other YAML is parsed with client-node's loader, imported only then
 * (it takes seconds to load on a busy machine).
 */
export const parseObject = async (text: string, yaml: boolean): Promise<KubeObject> => {
  let v: unknown;
  try {
    v = yaml && !/^\s*\{/.test(text) ? (await import("@kubernetes/client-node")).loadYaml(text) : JSON.parse(text);
  } catch (err) {
    throw badRequest(`error decoding ${yaml ? "YAML" : "JSON"}: ${(err as Error).message}`);
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) throw badRequest("Object 'Kind' is missing in the request body: expected an object");
  return v as KubeObject;
};
