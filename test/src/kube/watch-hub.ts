// Watch fan-out with a bounded event history, as the apiserver's watch cache keeps one: a watch from
// a resourceVersion older than the history answers 410 Gone (reason Expired) and the client relists.
import { gone, type KubeObject } from "./api-error.js";

export type EventType = "ADDED" | "MODIFIED" | "DELETED";

export interface StoredEvent {
  rv: number;
  type: EventType;
  /** `group/plural`: every version of a resource shares one storage. */
  resource: string;
  obj: KubeObject;
  /** The object before a MODIFIED, to tell a watcher with a selector that it left or entered it. */
  prev?: KubeObject;
}

export interface Watcher {
  resource: string;
  /** Selector and namespace filter, applied to an object state. */
  filter: (obj: KubeObject) => boolean;
  send: (type: EventType, obj: KubeObject) => void;
  close: () => void;
}

/** What a watcher sees of an event, after its filter: a change that leaves its selector is a DELETED. */
const viewOf = (w: Watcher, ev: StoredEvent): EventType | undefined => {
  const now = w.filter(ev.obj);
  if (ev.type !== "MODIFIED") return now ? ev.type : undefined;
  const before = ev.prev !== undefined && w.filter(ev.prev);
  if (before && now) return "MODIFIED";
  if (before) return "DELETED";
  return now ? "ADDED" : undefined;
};

export class WatchHub {
  private history: StoredEvent[] = [];
  /** Every event with rv greater than this is still in the history. */
  private compactedRv = 0;
  private readonly watchers = new Set<Watcher>();

  constructor(private readonly maxHistory: number) {}

  publish(ev: StoredEvent): void {
    this.history.push(ev);
    while (this.history.length > this.maxHistory) this.compactedRv = this.history.shift()!.rv;
    for (const w of this.watchers) this.deliver(w, ev);
  }

  private deliver(w: Watcher, ev: StoredEvent): void {
    if (w.resource !== ev.resource) return;
    const type = viewOf(w, ev);
    if (type) w.send(type, ev.obj);
  }

  /**
   * Starts a watcher after `fromRv` (events with a greater rv are replayed from the history, then
   * live ones follow). Throws 410 when `fromRv` is older than the history.
   */
  subscribe(w: Watcher, fromRv: number): () => void {
    this.checkVersion(fromRv);
    for (const ev of this.history) if (ev.rv > fromRv) this.deliver(w, ev);
    this.watchers.add(w);
    return () => this.watchers.delete(w);
  }

  /** Throws 410 Gone (reason Expired) when events after `fromRv` are no longer all in the history. */
  checkVersion(fromRv: number): void {
    if (fromRv < this.compactedRv) throw gone(`too old resource version: ${fromRv} (${this.compactedRv + 1})`);
  }

  /** Test hook: forgets the history up to `rv`, as etcd compaction does. */
  compact(rv: number): void {
    this.history = this.history.filter((e) => e.rv > rv);
    this.compactedRv = Math.max(this.compactedRv, rv);
  }

  /** Test hook: ends every open watch connection, as an apiserver restart or a load balancer does. */
  dropAll(): number {
    const all = [...this.watchers];
    this.watchers.clear();
    for (const w of all) w.close();
    return all.length;
  }

  get openWatches(): number {
    return this.watchers.size;
  }
}
