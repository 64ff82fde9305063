// A watch request: newline-delimited JSON events ({"type", "object"}) over a chunked response.
// resourceVersion unset or "0" starts with synthetic ADDED events for what exists; otherwise events
// after that version are replayed from the history (410 Gone when it is compacted). Bookmarks when
// asked (allowWatchBookmarks), and the end after timeoutSeconds.
import type { ServerResponse } from "node:http";
import { badRequest, type KubeObject } from "./api-error.js";
import { filterOf, wantsTable, type ResourceRequest } from "./handlers.js";
import { metaOf } from "./object-meta.js";
import { apiVersionOf } from "./resource-types.js";
import type { Storage } from "./storage.js";
import { toTable } from "./table.js";
import type { EventType, WatchHub } from "./watch-hub.js";

export interface WatchDeps {
  storage: Storage;
  hub: WatchHub;
  bookmarkIntervalMs: number;
}

const startVersion = (r: ResourceRequest): number | undefined => {
  const raw = r.url.searchParams.get("resourceVersion");
  if (raw === null || raw === "" || raw === "0") return undefined;
  if (!/^[0-9]+$/.test(raw)) throw badRequest(`invalid resource version: "${raw}"`);
  return Number(raw);
};

export const isWatch = (url: URL): boolean => ["1", "true"].includes(url.searchParams.get("watch") ?? "");

export const serveWatch = (deps: WatchDeps, r: ResourceRequest, res: ServerResponse): void => {
  const filter = filterOf(r);
  const from = startVersion(r);
  const table = wantsTable(r.req);
  const encode = (type: string, obj: KubeObject): string => {
    const object =
      table && type !== "BOOKMARK"
        ? toTable(r.type, [obj], { resourceVersion: String(metaOf(obj).resourceVersion), include: "Metadata" })
        : obj;
    return `${JSON.stringify({ type, object })}\n`;
  };
  const present = (obj: KubeObject): KubeObject => ({ ...obj, apiVersion: apiVersionOf(r.type) });
  const allowBookmarks = r.url.searchParams.get("allowWatchBookmarks") === "true";
  const seconds = Number(r.url.searchParams.get("timeoutSeconds") ?? "1800");
  let closed = false;
  let unsubscribe = (): void => {};
  const close = (): void => {
    if (closed) return;
    closed = true;
    unsubscribe();
    clearInterval(bookmarks);
    clearTimeout(timeout);
    res.end();
  };
  const send = (type: EventType | "BOOKMARK", obj: KubeObject): void => void (closed || res.write(encode(type, present(obj))));
  const bookmark = (extra: Record<string, string> = {}): void =>
    send("BOOKMARK", {
      kind: r.type.kind,
      metadata: { resourceVersion: String(deps.storage.resourceVersion), ...(Object.keys(extra).length ? { annotations: extra } : {}) },
    });
  // 410 before the response starts, as the apiserver's watch cache answers a too-old version
  const startAt = from ?? deps.storage.resourceVersion;
  deps.hub.checkVersion(startAt);
  res.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked", "cache-control": "no-cache, private" });
  res.flushHeaders();
  if (from === undefined) for (const obj of deps.storage.list(r.type, r.namespace).filter(filter)) send("ADDED", obj);
  unsubscribe = deps.hub.subscribe({ resource: `${r.type.group}/${r.type.plural}`, filter, send, close }, startAt);
  if (r.url.searchParams.get("sendInitialEvents") === "true") bookmark({ "k8s.io/initial-events-end": "true" });
  const bookmarks = setInterval(() => allowBookmarks && bookmark(), deps.bookmarkIntervalMs);
  const timeout = setTimeout(close, Math.max(1, seconds) * 1000);
  r.req.on("close", close);
  res.on("close", close);
};
