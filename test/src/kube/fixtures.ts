// Shared by the kube tests: a small hand-written CRD (a flowsvc-like kind), and how to read the
// Status of a refused client-node call.
import { get as httpsGet } from "node:https";
import { ApiException } from "@kubernetes/client-node";

export const GROUP = "demo.flowsvc.io";
export const VERSION = "v1alpha1";
export const PLURAL = "widgets";

/** A namespaced kind with a status subresource, printer columns, a short name and a category. */
export const widgetCrd = () => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: `${PLURAL}.${GROUP}` },
  spec: {
    group: GROUP,
    scope: "Namespaced",
    names: { plural: PLURAL, singular: "widget", kind: "Widget", shortNames: ["wdg"], categories: ["demo"] },
    versions: [
      {
        name: VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: [
          { name: "Size", type: "integer", jsonPath: ".spec.size" },
          { name: "Status", type: "string", jsonPath: ".status.phase" },
          { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
        ],
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: {
                type: "object",
                required: ["size"],
                properties: { size: { type: "integer", minimum: 0 }, color: { type: "string", enum: ["red", "blue"], default: "blue" } },
              },
              status: {
                type: "object",
                properties: { phase: { type: "string" }, observedGeneration: { type: "integer" } },
              },
            },
          },
        },
      },
    ],
  },
});

export interface StatusBody {
  kind?: string;
  code?: number;
  reason?: string;
  message?: string;
}

/** The HTTP code and Status body of a refused call (throws if the call succeeded). */
export const refusal = async (call: Promise<unknown>): Promise<{ code: number; status: StatusBody }> => {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof ApiException)) throw err;
    const body: unknown = err.body;
    const status = (typeof body === "string" ? JSON.parse(body) : (body ?? {})) as StatusBody;
    return { code: err.code, status };
  }
  throw new Error("the call succeeded; a refusal was expected");
};

/** A GET over HTTPS with the fake's CA and token, answering status and parsed body (for protocol checks). */
export const rawGet = (
  api: { url: string; caPem: string; token: string },
  path: string,
): Promise<{ status: number; body: Record<string, unknown> }> =>
  new Promise((resolve, reject) => {
    const req = httpsGet(`${api.url}${path}`, { ca: api.caPem, headers: { authorization: `Bearer ${api.token}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8").trim();
        resolve({ status: res.statusCode ?? 0, body: (text && !text.includes("\n") ? JSON.parse(text) : {}) as Record<string, unknown> });
      });
    });
    req.on("error", reject);
  });
