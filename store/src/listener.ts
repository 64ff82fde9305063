import pg from "pg";

export type NotifyChannel = "flowsvc_jobs" | "flowsvc_logs" | "flowsvc_runs" | "flowsvc_graphs";
const CHANNELS: readonly NotifyChannel[] = ["flowsvc_jobs", "flowsvc_logs", "flowsvc_runs", "flowsvc_graphs"];

export interface Listener {
  /** Calls `fn(payload)` on each NOTIFY of `channel`; returns an unsubscribe function. */
  on(channel: NotifyChannel, fn: (payload: string) => void): () => void;
  /** Also called after every reconnect, so subscribers re-read what they may have missed. */
  onReconnect(fn: () => void): () => void;
  /**
   * A transaction of this process committed `pg_notify(channel, payload)`: its subscribers here are
   * called now instead of after Postgres sends the NOTIFY back, and that echo is dropped when it
   * comes (or, if it came first, this call does nothing). Only for payloads unique to the
   * transaction (a run id): two transactions' notifications must not be taken for each other.
   */
  local(channel: NotifyChannel, payload: string): void;
  close(): Promise<void>;
}

/** How many unmatched local deliveries (or early echoes) a listener remembers. */
const ECHO_MEMORY = 4096;

/**
 * Matches local() deliveries with the NOTIFY echoes of the same (channel, payload), whichever
 * comes first: the first is delivered, the second dropped. Only channels local() was used on, and
 * only non-empty payloads, are looked at.
 */
const echoFilter = (): {
  takeLocal(channel: NotifyChannel, payload: string): boolean;
  isEcho(channel: NotifyChannel, payload: string): boolean;
} => {
  /** Payloads delivered by `local` whose echo has not come yet, and echoes that came before their `local`. */
  const awaitingEcho = new Set<string>();
  const echoedFirst = new Set<string>();
  const localChannels = new Set<NotifyChannel>();
  /** Both sets are bounded: an echo lost with a dropped connection (every subscriber is nudged on reconnect) is forgotten. */
  const remember = (set: Set<string>, key: string): void => {
    if (set.size >= ECHO_MEMORY) set.delete(set.values().next().value!);
    set.add(key);
  };
  return {
    takeLocal(channel, payload) {
      localChannels.add(channel);
      const key = `${channel}\u001f${payload}`;
      // Its echo came already, or it was delivered here already (several emits of one group commit).
      if (echoedFirst.delete(key) || awaitingEcho.has(key)) return false;
      remember(awaitingEcho, key);
      return true;
    },
    isEcho(channel, payload) {
      if (payload === "" || !localChannels.has(channel)) return false;
      const key = `${channel}\u001f${payload}`;
      if (awaitingEcho.delete(key)) return true;
      remember(echoedFirst, key);
      return false;
    },
  };
};

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
  const echoes = echoFilter();
  const fanOut = (channel: NotifyChannel, payload: string): void => {
    for (const fn of subs.get(channel) ?? []) fn(payload);
  };

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url, application_name: "flowsvc-listener" });
    c.on("notification", (n) => {
      const channel = n.channel as NotifyChannel;
      const payload = n.payload ?? "";
      if (echoes.isEcho(channel, payload)) return;
      fanOut(channel, payload);
    });
    c.on("error", (err) => {
      if (closed) return; // closed: Postgres going away now is no news
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
      c.end().catch(() => undefined);
      // Closed while this attempt was under way (a start refused with its port in use, say, stops
      // Postgres under it): no warning, no retry.
      if (closed) return;
      log("listener could not connect", err);
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
    local(channel, payload) {
      if (echoes.takeLocal(channel, payload)) fanOut(channel, payload);
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
