// The fake Kubernetes API server: real HTTPS on 127.0.0.1, started in-process by a test.
//
//   const api = await startFakeApiServer();
//   kubectl --kubeconfig api.kubeconfigPath get pods
//   api.compact(); api.dropWatches(); api.refuse((r) => ...); api.forbid((a) => ...); await api.close();
//
// It serves discovery, the built-in kinds in resource-types.ts, and every CRD applied to it.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiError, type KubeObject } from "./api-error.js";
import { Controllers } from "./controllers.js";
import { coreVersions, group, groupList, resourceList, versionInfo } from "./discovery.js";
import { handleResource, type Deps, type ResourceRequest } from "./handlers.js";
import { TypeRegistry } from "./resource-types.js";
import { openApiGroupVersion, openApiRoot } from "./openapi.js";
import { route, type Route } from "./router.js";
import { Storage } from "./storage.js";
import { servingCert } from "./tls.js";
import { WatchHub } from "./watch-hub.js";
import { isWatch, serveWatch } from "./watch-stream.js";
import { closeLoopback, listenLoopback } from "../support/loopback.js";

export interface FakeApiServerOptions {
  /** Bearer token every request must carry (default: a fixed test token; "" accepts any request). */
  token?: string;
  /** Watch history length, in events: a watch from an older resourceVersion gets 410 Gone. */
  maxHistory?: number;
  /** How often a watch that asked for bookmarks gets one. */
  bookmarkIntervalMs?: number;
  /** Namespaces created at start (default: default, kube-system). */
  namespaces?: string[];
}

export interface RequestRecord {
  method: string;
  path: string;
  contentType?: string;
  status: number;
}

export interface FakeApiServer {
  url: string;
  /** PEM of the serving certificate (the kubeconfig's certificate-authority-data). */
  caPem: string;
  kubeconfigPath: string;
  token: string;
  storage: Storage;
  hub: WatchHub;
  registry: TypeRegistry;
  /** Every request served, in order (a test counts writes with it). */
  requests: RequestRecord[];
  /** Forgets the watch history up to now: a watch from any older resourceVersion gets 410 Gone. */
  compact: () => void;
  /** Ends every open watch connection; returns how many there were. */
  dropWatches: () => number;
  /**
   * Fault injection: every request `when` matches is answered with `code` (default 503, as an
   * apiserver whose etcd does not answer) instead of being served; `refuse(undefined)` serves all again.
   */
  refuse: (when: ((r: { method: string; path: string }) => boolean) | undefined, code?: number) => void;
  /**
   * RBAC: every resource request `when` matches is refused 403 Forbidden, with the Status
   * kube-apiserver's authorizer answers (`<resource> "<name>" is forbidden: User "<user>" cannot
   * <verb> resource ...`); `forbid(undefined)` authorizes all again.
   */
  forbid: (when: ((a: RequestAttributes) => boolean) | undefined) => void;
  close: () => Promise<void>;
}

/** What an authorizer is asked about a resource request (k8s.io/apiserver's authorizer.Attributes). */
export interface RequestAttributes {
  /** get, list, watch, create, update, patch, delete, deletecollection. */
  verb: string;
  group: string;
  /** The plural, e.g. networkpolicies. */
  resource: string;
  subresource: string;
  /** "" at the cluster scope. */
  namespace: string;
  /** "" for a collection. */
  name: string;
}

/** The user every request is from (the token is the controller's ServiceAccount's, in a cluster). */
const USER = "system:serviceaccount:flowsvc:flowsvc-controller";

const send = (res: ServerResponse, status: number, body: KubeObject): void => {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
};

interface Context extends Deps {
  forbidden: ((a: RequestAttributes) => boolean) | undefined;
  hub: WatchHub;
  registry: TypeRegistry;
  token: string;
  bookmarkIntervalMs: number;
  host: string;
}

const discoveryDoc = (ctx: Context, r: Route): KubeObject | undefined => {
  if (r.kind === "group") return group(ctx.registry, r.group);
  if (r.kind === "resources") return resourceList(ctx.registry, r.group, r.version);
  if (r.kind !== "discovery") return undefined;
  switch (r.doc) {
    case "version":
      return versionInfo();
    case "api":
      return coreVersions(ctx.host);
    case "apis":
      return groupList(ctx.registry);
    case "healthz":
      return { status: "ok" };
    case "openapi":
      return undefined;
  }
};

const openApiDoc = (ctx: Context, pathname: string): KubeObject | undefined => {
  if (pathname === "/openapi/v3" || pathname === "/openapi/v3/") return openApiRoot(ctx.registry, ctx.storage.resourceVersion);
  return pathname.startsWith("/openapi/v3/") ? openApiGroupVersion(ctx.registry, pathname.slice("/openapi/v3/".length)) : undefined;
};

const notFoundPage = (): ApiError => new ApiError(404, "NotFound", "the server could not find the requested resource");

const serveDiscovery = (ctx: Context, http: { req: IncomingMessage; res: ServerResponse; url: URL }, r: Route): number => {
  const openapi = r.kind === "discovery" && r.doc === "openapi";
  const doc = http.req.method !== "GET" ? undefined : openapi ? openApiDoc(ctx, http.url.pathname) : discoveryDoc(ctx, r);
  if (!doc) throw notFoundPage();
  if (r.kind === "discovery" && r.doc === "healthz") http.res.writeHead(200, { "content-type": "text/plain" }).end("ok");
  else send(http.res, 200, doc);
  return 200;
};

const VERBS: Record<string, string> = { POST: "create", PUT: "update", PATCH: "patch", DELETE: "delete" };

/** The authorizer's verb of a request (endpoints/request/requestinfo.go). */
const verbOf = (method: string, named: boolean, url: URL): string => {
  if (method === "GET" || method === "HEAD") return named ? "get" : isWatch(url) ? "watch" : "list";
  if (method === "DELETE" && !named) return "deletecollection";
  return VERBS[method] ?? method.toLowerCase();
};

/** 403 as the RBAC authorizer's refusal reads (endpoints/handlers/responsewriters/errors.go, forbiddenMessage). */
const forbiddenError = (a: RequestAttributes): ApiError => {
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const scope = a.namespace ? `in the namespace "${a.namespace}"` : "at the cluster scope";
  const qualified = a.group ? `${a.resource}.${a.group}` : a.resource;
  const what = a.name ? `${qualified} "${a.name}"` : qualified;
  return new ApiError(
    403,
    "Forbidden",
    `${what} is forbidden: User "${USER}" cannot ${a.verb} resource "${resource}" in API group "${a.group}" ${scope}`,
    { ...(a.name ? { name: a.name } : {}), group: a.group, kind: a.resource },
  );
};

const attributesOf = (method: string, url: URL, r: Extract<Route, { kind: "resource" }>): RequestAttributes => ({
  verb: verbOf(method, Boolean(r.name), url),
  group: r.type.group,
  resource: r.type.plural,
  subresource: r.sub ?? "",
  namespace: r.namespace,
  name: r.name ?? "",
});

/** RBAC as the test set it (`forbid`): a refused request throws 403. */
const authorize = (ctx: Context, attributes: RequestAttributes): void => {
  if (ctx.forbidden?.(attributes)) throw forbiddenError(attributes);
};

const dispatch = async (ctx: Context, req: IncomingMessage, res: ServerResponse): Promise<number> => {
  if (ctx.token && req.headers.authorization !== `Bearer ${ctx.token}`) throw new ApiError(401, "Unauthorized", "Unauthorized");
  const url = new URL(req.url ?? "/", "http://fake");
  const r = route(ctx.registry, url.pathname);
  if (r.kind !== "resource") return serveDiscovery(ctx, { req, res, url }, r);
  authorize(ctx, attributesOf(req.method ?? "GET", url, r));
  const rr: ResourceRequest = {
    req,
    url,
    type: r.type,
    namespace: r.namespace,
    ...(r.name ? { name: r.name } : {}),
    ...(r.sub ? { sub: r.sub } : {}),
  };
  if (req.method === "GET" && !r.name && isWatch(url)) {
    serveWatch(ctx, rr, res);
    return 200;
  }
  const reply = await handleResource(ctx, rr);
  send(res, reply.status, reply.body);
  return reply.status;
};

const kubeconfig = (url: string, token: string, ca: string): string =>
  [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: fake",
    "  cluster:",
    `    server: ${url}`,
    `    certificate-authority-data: ${Buffer.from(ca).toString("base64")}`,
    "contexts:",
    "- name: fake",
    "  context:",
    "    cluster: fake",
    "    user: fake",
    "    namespace: default",
    "current-context: fake",
    "users:",
    "- name: fake",
    "  user:",
    `    token: ${token || "any"}`,
    "",
  ].join("\n");

export const startFakeApiServer = async (opts: FakeApiServerOptions = {}): Promise<FakeApiServer> => {
  const hub = new WatchHub(opts.maxHistory ?? 1000);
  const storage = new Storage(hub);
  const registry = new TypeRegistry();
  const controllers = new Controllers(storage, registry);
  const nsType = registry.get("", "v1", "namespaces")!;
  for (const ns of opts.namespaces ?? ["default", "kube-system"])
    storage.create({ type: nsType, namespace: "" }, { metadata: { name: ns } });
  const token = opts.token ?? "fake-token";
  const requests: RequestRecord[] = [];
  let refusal: { when: (r: { method: string; path: string }) => boolean; code: number } | undefined;
  const ctx: Context = {
    storage,
    controllers,
    forbidden: undefined,
    hub,
    registry,
    token,
    bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 1000,
    host: "",
  };
  const tls = servingCert();
  const server: Server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const record: RequestRecord = {
      method: req.method ?? "",
      path: req.url ?? "",
      status: 0,
      ...(req.headers["content-type"] ? { contentType: req.headers["content-type"] } : {}),
    };
    requests.push(record);
    if (refusal?.when({ method: record.method, path: record.path })) {
      const e = new ApiError(refusal.code, refusal.code === 503 ? "ServiceUnavailable" : "InternalError", "etcdserver: request timed out");
      record.status = e.code;
      req.resume();
      return send(res, e.code, e.toStatus());
    }
    dispatch(ctx, req, res).then(
      (status) => void (record.status = status),
      (err: unknown) => {
        const e = err instanceof ApiError ? err : new ApiError(500, "InternalError", `Internal error occurred: ${(err as Error).message}`);
        record.status = e.code;
        if (res.headersSent) res.end();
        else send(res, e.code, e.toStatus());
      },
    );
  });
  const port = await listenLoopback(server);
  const url = `https://127.0.0.1:${port}`;
  ctx.host = `127.0.0.1:${port}`;
  const dir = mkdtempSync(join(tmpdir(), "fake-kube-"));
  const kubeconfigPath = join(dir, "kubeconfig");
  writeFileSync(kubeconfigPath, kubeconfig(url, token, tls.cert), { mode: 0o600 });
  return {
    url,
    caPem: tls.cert,
    kubeconfigPath,
    token,
    storage,
    hub,
    registry,
    requests,
    compact: () => hub.compact(storage.resourceVersion),
    dropWatches: () => hub.dropAll(),
    refuse: (when, code = 503) => void (refusal = when ? { when, code } : undefined),
    forbid: (when) => void (ctx.forbidden = when),
    close: async () => {
      hub.dropAll();
      await closeLoopback(server);
      rmSync(dir, { recursive: true, force: true });
    },
  };
};
