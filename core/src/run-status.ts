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
