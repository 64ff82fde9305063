/**
 * A run's statuses (spec: "Run statuses"). The one list every layer asks: the store's SQL guards,
 * the log stream, `flow follow` and the local engine.
 */
export const RUN_STATUSES = ["queued", "running", "parked", "succeeded", "failed", "cancelled"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** A run in one of these has ended and never changes again. */
export const TERMINAL_STATUSES = ["succeeded", "failed", "cancelled"] as const satisfies readonly RunStatus[];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

export const isTerminalStatus = (status: string): status is TerminalStatus => (TERMINAL_STATUSES as readonly string[]).includes(status);

/** The terminal statuses as a SQL list literal, for `status not in (...)` guards in queries. */
export const TERMINAL_STATUSES_SQL = TERMINAL_STATUSES.map((s) => `'${s}'`).join(", ");

/** The statuses of a run still in flight (queued, running, parked). */
export const LIVE_STATUSES = RUN_STATUSES.filter((s) => !isTerminalStatus(s));

/**
 * The live statuses as a SQL list literal, for `status in (...)`: the partial indexes on live runs
 * (runs_live_created, runs_handler_in_flight, runs_graph_live) are on exactly this list, and a
 * statement that names it literally lets a generic plan use them (`not in (terminal)` does not).
 */
export const LIVE_STATUSES_SQL = LIVE_STATUSES.map((s) => `'${s}'`).join(", ");
