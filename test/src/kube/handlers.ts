// The verbs on a resource path: get, list, create, update, patch, delete, deletecollection, and the
// pods/binding subresource. Watch is in watch-stream.ts.
import type { IncomingMessage } from "node:http";
import { badRequest, methodNotAllowed, notFound, unsupportedMediaType, ApiError, type KubeObject } from "./api-error.js";
import { parseJson, parseObject, readBody } from "./body.js";
import type { Controllers } from "./controllers.js";
import { metaOf } from "./object-meta.js";
import { jsonPatch, mergePatch, strategicMerge } from "./patch.js";
import { apiVersionOf, type ResourceType } from "./resource-types.js";
import { parseFieldSelector, parseLabelSelector } from "./selectors.js";
import type { DeleteOptions, Storage, Subresource, Target, WriteOptions } from "./storage.js";
import { toTable, type IncludeObject } from "./table.js";

export interface Reply {
  status: number;
  body: KubeObject;
}

export interface ResourceRequest {
  req: IncomingMessage;
  url: URL;
  type: ResourceType;
  namespace: string;
  name?: string;
  sub?: string;
}

export interface Deps {
  storage: Storage;
  controllers: Controllers;
}

export const wantsTable = (req: IncomingMessage): boolean => /as=Table/.test(req.headers.accept ?? "");

/** The list filter of a request: namespace, labelSelector, fieldSelector. */
export const filterOf = (r: Pick<ResourceRequest, "url" | "type" | "namespace">): ((obj: KubeObject) => boolean) => {
  const labels = parseLabelSelector(r.url.searchParams.get("labelSelector"));
  const fields = parseFieldSelector(r.url.searchParams.get("fieldSelector"), [
    "metadata.name",
    "metadata.namespace",
    ...r.type.selectableFields,
  ]);
  return (obj) => (!r.namespace || metaOf(obj).namespace === r.namespace) && labels(metaOf(obj).labels ?? {}) && fields(obj);
};

/** Built-in lists carry no kind/apiVersion on their items; custom resource lists do. */
const listItem = (type: ResourceType, obj: KubeObject): KubeObject => {
  if (!type.builtin) return obj;
  const { kind: _k, apiVersion: _a, ...rest } = obj;
  return rest;
};

const list = (deps: Deps, r: ResourceRequest): Reply => {
  const filter = filterOf(r);
  const all = deps.storage.list(r.type, r.namespace).filter(filter);
  const rv = String(deps.storage.resourceVersion);
  const limit = Number(r.url.searchParams.get("limit") ?? "0");
  const cont = r.url.searchParams.get("continue");
  const start = cont ? Number(Buffer.from(cont, "base64url").toString("utf8")) : 0;
  if (!Number.isInteger(start) || start < 0) throw badRequest("continue key is not valid");
  const page = limit > 0 ? all.slice(start, start + limit) : all.slice(start);
  const next = limit > 0 && start + limit < all.length ? Buffer.from(String(start + limit)).toString("base64url") : undefined;
  if (wantsTable(r.req)) {
    const include = (r.url.searchParams.get("includeObject") ?? "Metadata") as IncludeObject;
    const table = toTable(r.type, page, { resourceVersion: rv, include });
    if (next) (table.metadata as Record<string, unknown>).continue = next;
    return { status: 200, body: table };
  }
  return {
    status: 200,
    body: {
      kind: r.type.listKind,
      apiVersion: apiVersionOf(r.type),
      metadata: { resourceVersion: rv, ...(next ? { continue: next } : {}) },
      items: page.map((o) => listItem(r.type, o)),
    },
  };
};

const writeOptions = (r: ResourceRequest): WriteOptions => ({ fieldValidation: r.url.searchParams.get("fieldValidation") ?? "" });

const target = (r: ResourceRequest): Target => ({ type: r.type, namespace: r.namespace, name: r.name! });

const get = (deps: Deps, r: ResourceRequest): Reply => {
  const obj = deps.storage.get(target(r));
  if (wantsTable(r.req)) {
    const include = (r.url.searchParams.get("includeObject") ?? "Metadata") as IncludeObject;
    return { status: 200, body: toTable(r.type, [obj], { resourceVersion: String(metaOf(obj).resourceVersion), include }) };
  }
  return { status: 200, body: obj };
};

const subresourceOf = (r: ResourceRequest): Subresource => {
  if (r.sub === undefined) return "main";
  if (r.sub === "status" && r.type.statusSubresource) return "status";
  throw notFound(r.type.group, `${r.type.plural}/${r.sub}`, r.name ?? "");
};

const PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];

/** Applies a patch body of `contentType` to the current object. */
const patcher = async (type: ResourceType, contentType: string, text: string): Promise<(current: KubeObject) => KubeObject> => {
  switch (contentType) {
    case "application/merge-patch+json":
      return (cur) => mergePatch(cur, parseJson(text)) as KubeObject;
    case "application/json-patch+json":
      return (cur) => jsonPatch(cur, parseJson(text)) as KubeObject;
    case "application/strategic-merge-patch+json":
      if (!type.builtin) break;
      return (cur) => strategicMerge(cur, parseJson(text)) as KubeObject;
    case "application/apply-patch+yaml": {
      const applied = await parseObject(text, true);
      return (cur) => (type.builtin ? strategicMerge(cur, applied) : mergePatch(cur, applied)) as KubeObject;
    }
  }
  throw unsupportedMediaType(contentType, type.builtin ? [...PATCH_TYPES, "application/strategic-merge-patch+json"] : PATCH_TYPES);
};

const patch = async (deps: Deps, r: ResourceRequest): Promise<Reply> => {
  const contentType = (r.req.headers["content-type"] ?? "").split(";")[0]!.trim();
  const text = await readBody(r.req);
  const change = await patcher(r.type, contentType, text);
  const sub = subresourceOf(r);
  if (contentType === "application/apply-patch+yaml") {
    if (!r.url.searchParams.get("fieldManager"))
      throw badRequest("PATCH requests with application/apply-patch+yaml must have fieldManager set");
    if (!deps.storage.find(target(r))) {
      const applied = await parseObject(text, true);
      return {
        status: 201,
        body: deps.storage.create(
          { type: r.type, namespace: r.namespace },
          { ...applied, metadata: { ...metaOf(applied), name: r.name } },
          writeOptions(r),
        ),
      };
    }
  }
  return { status: 200, body: deps.storage.modify(target(r), change, sub, writeOptions(r)) };
};

const deleteOptions = async (r: ResourceRequest): Promise<DeleteOptions> => {
  const text = await readBody(r.req);
  const body = (text.trim() ? parseJson(text) : {}) as DeleteOptions;
  const q = r.url.searchParams;
  const grace = q.get("gracePeriodSeconds");
  return {
    ...body,
    ...(q.get("propagationPolicy") ? { propagationPolicy: q.get("propagationPolicy")! } : {}),
    ...(grace !== null ? { gracePeriodSeconds: Number(grace) } : {}),
  };
};

const remove = async (deps: Deps, r: ResourceRequest): Promise<Reply> => {
  const opts = await deleteOptions(r);
  if (opts.propagationPolicy && !["Orphan", "Background", "Foreground"].includes(opts.propagationPolicy)) {
    throw new ApiError(
      422,
      "Invalid",
      `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "${opts.propagationPolicy}"`,
    );
  }
  if (opts.propagationPolicy === "Orphan") deps.controllers.orphan(deps.storage.get(target(r)));
  return { status: 200, body: deps.storage.delete(target(r), opts) };
};

const removeCollection = async (deps: Deps, r: ResourceRequest): Promise<Reply> => {
  const opts = await deleteOptions(r);
  const filter = filterOf(r);
  const items = deps.storage.list(r.type, r.namespace).filter(filter);
  const done = items.map((obj) =>
    deps.storage.delete({ type: r.type, namespace: metaOf(obj).namespace ?? "", name: metaOf(obj).name! }, opts),
  );
  return {
    status: 200,
    body: {
      kind: r.type.listKind,
      apiVersion: apiVersionOf(r.type),
      metadata: { resourceVersion: String(deps.storage.resourceVersion) },
      items: done,
    },
  };
};

/** POST pods/<name>/binding: the scheduler's way to set spec.nodeName, once. */
const bind = async (deps: Deps, r: ResourceRequest): Promise<Reply> => {
  const binding = await parseObject(await readBody(r.req), false);
  const node = (binding.target as { name?: string } | undefined)?.name;
  if (!node) throw new ApiError(422, "Invalid", "Binding.target.name: Required value");
  const pod = deps.storage.get(target(r));
  const bound = (pod.spec as { nodeName?: string }).nodeName;
  if (bound)
    throw new ApiError(
      409,
      "Conflict",
      `Operation cannot be fulfilled on pods/binding "${r.name}": pod ${r.name} is already assigned to node "${bound}"`,
    );
  deps.storage.force(target(r), (o) => void ((o.spec as Record<string, unknown>).nodeName = node));
  return { status: 201, body: { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", code: 201 } };
};

const onCollection = async (deps: Deps, r: ResourceRequest): Promise<Reply> => {
  switch (r.req.method) {
    case "GET":
      return list(deps, r);
    case "POST":
      if (!r.type.namespaced || r.namespace)
        return {
          status: 201,
          body: deps.storage.create(
            { type: r.type, namespace: r.namespace },
            await parseObject(await readBody(r.req), false),
            writeOptions(r),
          ),
        };
      break;
    case "DELETE":
      return removeCollection(deps, r);
  }
  throw methodNotAllowed();
};

const onObject = async (deps: Deps, r: ResourceRequest): Promise<Reply> => {
  if (r.sub === "binding" && r.type.builtin && r.type.kind === "Pod" && r.req.method === "POST") return bind(deps, r);
  switch (r.req.method) {
    case "GET":
      subresourceOf(r);
      return get(deps, r);
    case "PUT":
      return {
        status: 200,
        body: deps.storage.update(target(r), await parseObject(await readBody(r.req), false), subresourceOf(r), writeOptions(r)),
      };
    case "PATCH":
      return patch(deps, r);
    case "DELETE":
      if (r.sub) break;
      return remove(deps, r);
  }
  throw methodNotAllowed();
};

export const handleResource = (deps: Deps, r: ResourceRequest): Promise<Reply> => (r.name ? onObject(deps, r) : onCollection(deps, r));
