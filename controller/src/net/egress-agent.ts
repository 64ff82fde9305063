/**
 * The undici dispatcher for requests to a URL a workflow author chose (the `http` node): the
 * egress policy (egress-policy.ts) is applied to the address each connection is actually opened
 * to, at connect time. A host that is an IP literal (however it was spelled: the URL parser has
 * already turned `2852039166`, `0xa9fea9fe` and `[::ffff:a9fe:a9fe]` into one form) is judged
 * before connecting; a name is judged on every address DNS answers, inside the socket's own
 * lookup, so the address checked is the address connected to (no second resolution a rebinding
 * name could answer differently). A refused destination fails the request with EgressRefusedError
 * before any byte leaves. Redirects are not followed (undici's `request` does not; this dispatcher
 * adds no redirect interceptor).
 */
import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupAddress, LookupOptions } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { Agent, buildConnector } from "undici";
import { egressRefusal, refusalMessage, type EgressPolicy } from "./egress-policy.js";

/** A connection the egress policy refused; its message names the host, the address and the setting that would allow it. */
export class EgressRefusedError extends Error {
  override readonly name = "EgressRefusedError";
  readonly code = "FLOWSVC_EGRESS_REFUSED";
}

const refusedAmong = (policy: EgressPolicy, host: string, addresses: readonly LookupAddress[]): EgressRefusedError | undefined => {
  for (const a of addresses) {
    const r = egressRefusal(policy, a.address);
    if (r) return new EgressRefusedError(refusalMessage(host, r));
  }
  return undefined;
};

/** Every address of a name, as the system resolver answers (getaddrinfo, /etc/hosts included). */
export type Resolve = (hostname: string, options: LookupOptions) => Promise<LookupAddress[]>;

const systemResolve: Resolve = (hostname, options) => dnsLookup(hostname, { ...options, all: true });

/** The resolver, then the policy on every answer (one refused address refuses the name: which one a connection takes is not ours to pick). */
const guardedLookup =
  (policy: EgressPolicy, resolve: Resolve): LookupFunction =>
  (hostname: string, options: LookupOptions, callback) => {
    resolve(hostname, options).then(
      (addresses) => {
        const refused = refusedAmong(policy, hostname, addresses);
        if (refused) return callback(refused, "", 0);
        const first = addresses[0];
        if (options.all) return callback(null, addresses);
        if (!first) return callback(Object.assign(new Error(`${hostname}: no address`), { code: "ENOTFOUND" }), "", 0);
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, "", 0),
    );
  };

/**
 * The guarded dispatcher; one per deployable, passed to the graph engine (NodeContext.egress).
 * `resolve` is the system resolver unless a test answers names itself.
 */
export const createEgressAgent = (policy: EgressPolicy, resolve: Resolve = systemResolve): Agent => {
  const connectGuarded = buildConnector({ lookup: guardedLookup(policy, resolve) });
  return new Agent({
    connect: (options, callback) => {
      // undici hands an IPv6 literal without its brackets; an IP literal never reaches lookup.
      const r = isIP(options.hostname) !== 0 ? egressRefusal(policy, options.hostname) : undefined;
      if (r) return callback(new EgressRefusedError(refusalMessage(options.hostname, r)), null);
      connectGuarded(options, callback);
    },
  });
};
