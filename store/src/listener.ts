import pg from "pg";

export type NotifyChannel = "flowsvc_jobs" | "flowsvc_logs" | "flowsvc_runs" | "flowsvc_graphs";
const CHANNELS: readonly NotifyChannel[] = ["flowsvc_jobs", "flowsvc_logs", "flowsvc_runs", "flowsvc_graphs"];

export interface Listener {
  /** Calls `fn(payload)` on each NOTIFY of `channel`; returns an unsubscribe function. */
  on(channel: NotifyChannel, fn: (payload: string) => void): () => void;
  /** Also called after every reconnect, so subscribers re-read what they may have missed. */
  onReconnect(fn: () => void): () => void;
  close(): Promise<void>;
}

/**
 * One LISTEN connection per process. NOTIFY is a nudge, never the data: subscribers re-read the
 * tables. The connection reconnects with jittered backoff (as graphile-worker's main loop does),
 * and every reconnect nudges everyone, because notifications sent while down are gone.
 */
export const startListener = (url: string, log: (msg: string, err?: unknown) => void): Listener => {
  const subs = new Map<NotifyChannel, Set<(p: string) => void>>();
  const reconnectSubs = new Set<() => void>();
  let client: pg.Client | undefined;
  let closed = false;
  let attempt = 0;
  let timer: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url, application_name: "flowsvc-listener" });
    c.on("notification", (n) => {
      for (const fn of subs.get(n.channel as NotifyChannel) ?? []) fn(n.payload ?? "");
    });
    c.on("error", (err) => {
      log("listener connection error", err);
      schedule();
    });
    try {
      await c.connect();
      for (const ch of CHANNELS) await c.query(`listen ${ch}`);
      if (closed) {
        await c.end();
        return;
      }
      client = c;
      if (attempt > 0) reconnectSubs.forEach((fn) => fn());
      attempt = 0;
    } catch (err) {
      log("listener could not connect", err);
      c.end().catch(() => undefined);
      schedule();
    }
  };

  const schedule = (): void => {
    if (closed || timer) return;
    client?.end().catch(() => undefined);
    client = undefined;
    attempt++;
    const delay = Math.min(5000, 100 * 2 ** Math.min(attempt, 6)) * (0.5 + Math.random() / 2);
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, delay);
  };

  void connect();

  return {
    on(channel, fn) {
      let set = subs.get(channel);
      if (!set) subs.set(channel, (set = new Set()));
      set.add(fn);
      return () => set.delete(fn);
    },
    onReconnect(fn) {
      reconnectSubs.add(fn);
      return () => reconnectSubs.delete(fn);
    },
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      await client?.end().catch(() => undefined);
    },
  };
};
