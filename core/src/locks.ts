/**
 * The lock rules (`flow lock <group>` / `flow unlock`; docs/internals.md, "Waits and locks") as
 * pure decisions over one group's queue. The store keeps the queue in `lock_leases` (serialised
 * per group by an advisory lock), the local engine in a directory of arrival-stamped files; both
 * ask these functions who holds the lease, who is granted next and which entries are gone.
 */

/** One request in a group's queue, oldest first. */
export interface LeaseRequest {
  /** The lease was granted to it (and not released). */
  readonly granted: boolean;
  /** Its run can still hold the lease (false: a local `flow run` that was killed). Default true. */
  readonly live?: boolean;
}

export interface LeaseDecision<R extends LeaseRequest> {
  /** The request granted the lease now, if any. */
  readonly grant: R | undefined;
  /** Requests whose holder is gone: removed from the queue. */
  readonly drop: readonly R[];
}

const isLive = (r: LeaseRequest): boolean => r.live !== false;

/**
 * FIFO: while a live request holds the lease nobody else is granted; otherwise the oldest live
 * request is. Requests that are not live are dropped, wherever they are.
 */
export const decideLease = <R extends LeaseRequest>(queue: readonly R[]): LeaseDecision<R> => {
  const live = queue.filter(isLive);
  const drop = queue.filter((r) => !isLive(r));
  if (live.some((r) => r.granted)) return { grant: undefined, drop };
  return { grant: live[0], drop };
};

/**
 * Whether `mine` holds the lease of a queue in which only arrival order is kept (no grant is
 * recorded: the oldest live request holds it). `ahead` are the requests that arrived before it.
 */
export const holdsLease = <R extends LeaseRequest>(ahead: readonly R[], mine: R): boolean => decideLease([...ahead, mine]).grant === mine;

/** A run that already holds a group's lease is granted again at once: a run never waits for itself. */
export const grantsAtOnce = (runHoldsGroup: boolean): boolean => runHoldsGroup;

/**
 * The lease `flow unlock` lets go: the run's newest granted request of the group (bracketed
 * locks nest). `held` is the run's granted, unreleased requests of the group, oldest first.
 */
export const leaseToRelease = <R>(held: readonly R[]): R | undefined => held[held.length - 1];
