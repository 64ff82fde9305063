/**
 * Leader election with a coordination.k8s.io/v1 Lease (issue 16, item 6), client-go's algorithm:
 * - a candidate takes the Lease when it does not exist, or when its record (holder, renewTime,
 *   resourceVersion) has not changed for leaseDuration by the candidate's own clock (no clock is
 *   compared with another host's); every write carries the resourceVersion read, so of two
 *   candidates one wins and the other gets 409;
 * - the leader renews every retryPeriod; when no renewal succeeded for renewDeadline (shorter than
 *   leaseDuration) it steps down at once, before anyone may take the Lease; a stop releases it
 *   (holder cleared, so a successor need not wait), a kill -9 does not (the successor waits out
 *   leaseDuration).
 */
import type { CoordinationV1Api, V1Lease } from "@kubernetes/client-node";
import type { LeaderElectionSettings } from "../config.js";
import type { ControllerLogger } from "../dispatcher.js";
import { apiMessage, apiStatus } from "./client.js";

export interface LeaderElectorOptions {
  coordination: CoordinationV1Api;
  namespace: string;
  identity: string;
  settings: Pick<LeaderElectionSettings, "leaseName" | "leaseDurationSeconds" | "renewDeadlineSeconds" | "retryPeriodSeconds">;
  logger: ControllerLogger;
  /** Became the leader: start the singletons. */
  onStartedLeading: () => void | Promise<void>;
  /** Lost the Lease (could not renew within renewDeadline): stop them now. Not called by stop(). */
  onStoppedLeading: () => void;
}

/** Abandons a call that outlives `ms` (a hung connection must not keep a leader past its deadline). */
const within = <T>(p: Promise<T>, ms: number): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e instanceof Error ? e : new Error(String(e)))),
    );
  });

const recordKey = (l: V1Lease): string =>
  JSON.stringify([l.spec?.holderIdentity ?? "", String(l.spec?.renewTime ?? ""), l.metadata?.resourceVersion ?? ""]);

export class LeaderElector {
  readonly #o: LeaderElectorOptions;
  readonly #durationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryMs: number;
  /** The last record read, and when (by this clock) it last changed. */
  #observed: { key: string; at: number } | undefined;
  #leading = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #deadline: NodeJS.Timeout | undefined;
  #lastHolder: string | undefined;

  constructor(opts: LeaderElectorOptions) {
    this.#o = opts;
    this.#durationMs = opts.settings.leaseDurationSeconds * 1000;
    this.#renewDeadlineMs = opts.settings.renewDeadlineSeconds * 1000;
    this.#retryMs = opts.settings.retryPeriodSeconds * 1000;
  }

  get leading(): boolean {
    return this.#leading;
  }

  /** Starts campaigning; returns at once. */
  start(): void {
    this.#o.logger.info(
      { lease: this.#o.settings.leaseName, namespace: this.#o.namespace, identity: this.#o.identity },
      "campaigning for the lease",
    );
    void this.#tick();
  }

  async #tick(): Promise<void> {
    if (this.#stopped) return;
    let ok = false;
    try {
      ok = await within(this.#tryAcquireOrRenew(), Math.max(100, this.#retryMs * 2, this.#renewDeadlineMs / 2));
    } catch (err) {
      const level = this.#leading ? "warn" : "info";
      this.#o.logger[level]({ err: apiMessage(err) }, this.#leading ? "could not renew the lease" : "could not read or take the lease");
    }
    if (this.#stopped) return;
    if (ok) this.#renewed();
    this.#timer = setTimeout(() => void this.#tick(), this.#retryMs * (this.#leading ? 1 : 1 + Math.random() * 0.2));
  }

  #renewed(): void {
    clearTimeout(this.#deadline);
    this.#deadline = setTimeout(() => this.#stepDown(), this.#renewDeadlineMs);
    if (this.#leading) return;
    this.#leading = true;
    this.#o.logger.info({ identity: this.#o.identity, lease: this.#o.settings.leaseName }, "became the leader");
    void Promise.resolve()
      .then(() => this.#o.onStartedLeading())
      .catch((err: unknown) => {
        this.#o.logger.error({ err }, "starting as the leader failed; stepping down");
        this.#stepDown();
      });
  }

  /** No renewal within renewDeadline: stop leading now, before the lease could be taken. */
  #stepDown(): void {
    if (!this.#leading) return;
    this.#leading = false;
    clearTimeout(this.#deadline);
    this.#o.logger.error({ identity: this.#o.identity, renewDeadlineMs: this.#renewDeadlineMs }, "lost the lease; stopped leading");
    this.#o.onStoppedLeading();
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    const { coordination, namespace } = this.#o;
    const name = this.#o.settings.leaseName;
    let lease: V1Lease;
    try {
      lease = await coordination.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
      const spec = { ...this.#spec(new Date()), acquireTime: new Date(), leaseTransitions: 0 };
      return this.#write(() => coordination.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec } }));
    }
    const holder = this.#observe(lease);
    if (holder && holder !== this.#o.identity && Date.now() - this.#observed!.at < this.#durationMs) return false;
    return this.#write(() => coordination.replaceNamespacedLease({ name, namespace, body: this.#taken(lease, holder) }));
  }

  #spec(now: Date): { holderIdentity: string; leaseDurationSeconds: number; renewTime: Date } {
    return { holderIdentity: this.#o.identity, leaseDurationSeconds: this.#o.settings.leaseDurationSeconds, renewTime: now };
  }

  /** Notes when the record last changed (by this clock); answers its holder ("" when released). */
  #observe(lease: V1Lease): string {
    const key = recordKey(lease);
    if (this.#observed?.key !== key) this.#observed = { key, at: Date.now() };
    const holder = lease.spec?.holderIdentity ?? "";
    if (holder !== this.#o.identity && this.#lastHolder !== holder) {
      this.#lastHolder = holder;
      if (holder) this.#o.logger.info({ holder }, "the lease is held by another replica");
    }
    return holder;
  }

  /** The Lease renewed by its holder, or taken over (acquireTime now, one more transition). */
  #taken(lease: V1Lease, holder: string): V1Lease {
    const now = new Date();
    const takeover = holder !== this.#o.identity;
    const spec = lease.spec ?? {};
    return {
      ...lease,
      spec: {
        ...spec,
        ...this.#spec(now),
        acquireTime: takeover ? now : (spec.acquireTime ?? now),
        leaseTransitions: (spec.leaseTransitions ?? 0) + (takeover && holder ? 1 : 0),
      },
    };
  }

  /** A create or replace: a 409 means another replica wrote first (not an error). */
  async #write(call: () => Promise<V1Lease>): Promise<boolean> {
    try {
      const written = await call();
      this.#observed = { key: recordKey(written), at: Date.now() };
      return true;
    } catch (err) {
      if (apiStatus(err) === 409) return false;
      throw err;
    }
  }

  /** Stops campaigning; a leader releases the Lease (holder cleared) so a successor takes it at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#deadline);
    if (!this.#leading) return;
    this.#leading = false;
    const { coordination, namespace } = this.#o;
    const name = this.#o.settings.leaseName;
    try {
      const lease = await coordination.readNamespacedLease({ name, namespace });
      if (lease.spec?.holderIdentity !== this.#o.identity) return;
      await coordination.replaceNamespacedLease({
        name,
        namespace,
        body: { ...lease, spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: new Date() } },
      });
      this.#o.logger.info({ lease: name }, "released the lease");
    } catch (err) {
      this.#o.logger.warn({ err: apiMessage(err) }, "could not release the lease; a successor waits out its duration");
    }
  }
}
