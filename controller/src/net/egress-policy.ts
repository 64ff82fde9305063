/**
 * Where the server itself may connect on behalf of a workflow author (the `http` node): the one
 * rule, as pure functions over an IP address. The connect-time guard (egress-agent.ts) applies it
 * to every address a request actually connects to, after DNS; nothing here resolves names.
 *
 * - Always refused unless the operator allows a range explicitly (FLOWSVC_HTTP_ALLOW_CIDRS):
 *   link-local (169.254/16 with the cloud's instance metadata, fe80::/10), the AWS IPv6 metadata
 *   address fd00:ec2::254, "this host" (0.0.0.0/8, ::), multicast, broadcast and the reserved
 *   240/4.
 * - Loopback (127/8, ::1), private (10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10) and shared
 *   CGNAT (100.64/10) addresses: refused by default in Kubernetes mode (the controller's
 *   neighbourhood), allowed by default in local mode (a laptop's own services);
 *   FLOWSVC_HTTP_ALLOW_PRIVATE flips the default.
 * - An IPv6 address that carries an IPv4 one (mapped ::ffff:a.b.c.d, compatible ::a.b.c.d,
 *   translated ::ffff:0:a.b.c.d, NAT64 64:ff9b::a.b.c.d) is judged as that IPv4 address.
 *
 * Node's BlockList does the range matching; the address must already be an IP (net.isIP).
 */
import { BlockList, isIP } from "node:net";

export const HTTP_ALLOW_CIDRS_VAR = "FLOWSVC_HTTP_ALLOW_CIDRS";
export const HTTP_ALLOW_PRIVATE_VAR = "FLOWSVC_HTTP_ALLOW_PRIVATE";

/** What kind of address it is, for the rule and the message. */
export const ADDRESS_CLASSES = {
  public: { label: "public", always: false, private: false },
  loopback: { label: "loopback", always: false, private: true },
  private: { label: "private", always: false, private: true },
  shared: { label: "shared (CGNAT 100.64.0.0/10)", always: false, private: true },
  "link-local": { label: "link-local", always: true, private: false },
  metadata: { label: "cloud instance metadata", always: true, private: false },
  unspecified: { label: 'unspecified ("this host")', always: true, private: false },
  multicast: { label: "multicast", always: true, private: false },
  broadcast: { label: "broadcast", always: true, private: false },
  reserved: { label: "reserved", always: true, private: false },
} as const;
export type AddressClass = keyof typeof ADDRESS_CLASSES;

/** The deployment mode decides the default for private addresses. */
export type EgressMode = "local" | "kubernetes";

export interface EgressPolicy {
  /** Loopback, private and CGNAT addresses may be reached. */
  readonly allowPrivate: boolean;
  /** The operator's ranges, as given (normalised): reachable whatever their class. */
  readonly allowCidrs: readonly string[];
  readonly allowList: BlockList;
}

/** Why a destination is refused: its address, its class, and which setting would allow it. */
export interface EgressRefusal {
  readonly address: string;
  readonly class: AddressClass;
}

const V4_RANGES: ReadonlyArray<readonly [string, number, AddressClass]> = [
  ["0.0.0.0", 8, "unspecified"],
  ["127.0.0.0", 8, "loopback"],
  ["10.0.0.0", 8, "private"],
  ["172.16.0.0", 12, "private"],
  ["192.168.0.0", 16, "private"],
  ["100.64.0.0", 10, "shared"],
  ["169.254.169.254", 32, "metadata"],
  ["169.254.0.0", 16, "link-local"],
  ["224.0.0.0", 4, "multicast"],
  ["255.255.255.255", 32, "broadcast"],
  ["240.0.0.0", 4, "reserved"],
];

const V6_RANGES: ReadonlyArray<readonly [string, number, AddressClass]> = [
  ["::", 128, "unspecified"],
  ["::1", 128, "loopback"],
  ["fd00:ec2::254", 128, "metadata"],
  ["fe80::", 10, "link-local"],
  ["fc00::", 7, "private"],
  ["fec0::", 10, "private"],
  ["ff00::", 8, "multicast"],
  // Forms that reach an IPv4 address through a gateway where the address sits at a position the
  // prefix decides (so it cannot be judged as that IPv4 address, as V4_CARRIERS' forms are): the
  // local-use NAT64 prefix (RFC 8215; a /48 puts the IPv4 bits around the u octet), 6to4 (2002::/16)
  // and Teredo (2001::/32, the IPv4 address obfuscated). Through any of them 169.254.169.254 could be
  // reached; an operator whose network needs one allows it by FLOWSVC_HTTP_ALLOW_CIDRS.
  ["64:ff9b:1::", 48, "reserved"],
  ["2002::", 16, "reserved"],
  ["2001::", 32, "reserved"],
];

/** One BlockList per class and family, checked in the order above (the first match wins). */
const rangeLists = (ranges: ReadonlyArray<readonly [string, number, AddressClass]>, family: "ipv4" | "ipv6") =>
  ranges.map(([net, prefix, cls]) => {
    const list = new BlockList();
    list.addSubnet(net, prefix, family);
    return { list, cls };
  });
const V4_LISTS = rangeLists(V4_RANGES, "ipv4");
const V6_LISTS = rangeLists(V6_RANGES, "ipv6");

/** The eight 16-bit words of an IPv6 address (isIP already said it is one), a trailing dotted quad included. */
const ipv6Words = (ip: string): number[] => {
  let text = ip.toLowerCase();
  const zone = text.indexOf("%");
  if (zone >= 0) text = text.slice(0, zone);
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const part = (s: string | undefined): number[] => (s ? s.split(":").map((w) => parseInt(w, 16)) : []);
  const front = part(head);
  const back = part(tail);
  const fill = tail === undefined ? [] : new Array<number>(8 - front.length - back.length).fill(0);
  return [...front, ...fill, ...back];
};

const quadOf = (hi: number, lo: number): string => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;

/** The first six words of the IPv6 forms whose last 32 bits are an IPv4 address: mapped, translated, NAT64, compatible. */
const V4_CARRIERS: ReadonlyArray<readonly number[]> = [
  [0, 0, 0, 0, 0, 0xffff],
  [0, 0, 0, 0, 0xffff, 0],
  [0x64, 0xff9b, 0, 0, 0, 0],
  [0, 0, 0, 0, 0, 0],
];

/** The IPv4 address an IPv6 one carries (mapped, compatible, translated, NAT64), or undefined. */
export const embeddedIpv4 = (ip: string): string | undefined => {
  if (isIP(ip) !== 6) return undefined;
  const w = ipv6Words(ip);
  const [hi = 0, lo = 0] = w.slice(6);
  if (!V4_CARRIERS.some((prefix) => prefix.every((word, i) => word === w[i]))) return undefined;
  // :: and ::1 keep their own IPv6 meanings (compatible ::a.b.c.d is every other ::/96 address).
  if (w.slice(0, 6).every((word) => word === 0) && hi === 0 && lo <= 1) return undefined;
  return quadOf(hi, lo);
};

/** The class of an IP address (IPv4 or IPv6, no brackets); anything that is not an IP is "reserved" (never connected to). */
export const classifyAddress = (address: string): AddressClass => {
  // A zone (fe80::1%eth0) says which interface, not which address.
  const ip = address.replace(/%.*$/, "");
  const family = isIP(ip);
  if (family === 4) return V4_LISTS.find((r) => r.list.check(ip, "ipv4"))?.cls ?? "public";
  if (family !== 6) return "reserved";
  const v4 = embeddedIpv4(ip);
  if (v4 !== undefined) return classifyAddress(v4);
  return V6_LISTS.find((r) => r.list.check(ip, "ipv6"))?.cls ?? "public";
};

const allowedByOperator = (policy: EgressPolicy, address: string): boolean => {
  const ip = address.replace(/%.*$/, "");
  const v4 = isIP(ip) === 4 ? ip : embeddedIpv4(ip);
  if (v4 !== undefined && policy.allowList.check(v4, "ipv4")) return true;
  return isIP(ip) === 6 && policy.allowList.check(ip, "ipv6");
};

/** Why `ip` (an address about to be connected to) is refused under `policy`, or undefined when it may be reached. */
export const egressRefusal = (policy: EgressPolicy, ip: string): EgressRefusal | undefined => {
  const cls = classifyAddress(ip);
  if (cls === "public" || allowedByOperator(policy, ip)) return undefined;
  const c = ADDRESS_CLASSES[cls];
  if (c.private && policy.allowPrivate) return undefined;
  return { address: ip, class: cls };
};

/**
 * The refusal as a user reads it: what the host resolved to, what kind of address that is, and
 * the setting that would allow it. `host` is the URL's host name only (never its query or user
 * info: they may carry a credential).
 */
export const refusalMessage = (host: string, r: EgressRefusal, who = "http nodes"): string => {
  const c = ADDRESS_CLASSES[r.class];
  const bare = host.replace(/^\[(.*)\]$/, "$1");
  const v4 = embeddedIpv4(r.address);
  const address = v4 === undefined ? r.address : `${r.address} (IPv4 ${v4})`;
  const what = bare === r.address ? `${address} is` : `${host} resolves to ${address},`;
  const article = /^[aeiou]/.test(c.label) ? "an" : "a";
  const how = c.always
    ? `${who} may never reach ${c.label} addresses unless the operator allows the range (${HTTP_ALLOW_CIDRS_VAR})`
    : `${who} may not reach ${c.label} addresses here (set ${HTTP_ALLOW_CIDRS_VAR} or ${HTTP_ALLOW_PRIVATE_VAR})`;
  return `${what} ${article} ${c.label} address; ${how}`;
};

const shown = (s: string): string => JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}...` : s);

export interface Cidr {
  net: string;
  prefix: number;
  family: "ipv4" | "ipv6";
}

/**
 * One CIDR (`10.0.0.0/8`, `fd00::/8`), or why it is not one. A bare address is a /32 or /128
 * unless `requirePrefix` (a Kubernetes ipBlock's cidr must have one).
 */
export const parseCidr = (text: string, requirePrefix = false): Cidr | string => {
  const slash = text.indexOf("/");
  const net = slash < 0 ? text : text.slice(0, slash);
  const family = isIP(net);
  if (family === 0 || (requirePrefix && slash < 0)) return `${shown(text)} is not a CIDR (an IPv4 or IPv6 address, then /prefix length)`;
  const max = family === 4 ? 32 : 128;
  const prefixText = slash < 0 ? String(max) : text.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(prefixText) || Number(prefixText) > max)
    return `${shown(text)} is not a CIDR: the prefix length must be a whole number from 0 to ${max}`;
  return { net, prefix: Number(prefixText), family: family === 4 ? "ipv4" : "ipv6" };
};

/** One CIDR or one address added to `list`, or why it is not one. */
const addCidr = (list: BlockList, text: string): string | undefined => {
  const cidr = parseCidr(text);
  if (typeof cidr === "string") return cidr;
  list.addSubnet(cidr.net, cidr.prefix, cidr.family);
  return undefined;
};

/**
 * The policy from the two settings' text (unset or empty: the mode's default), or every problem,
 * each naming its variable and the bad value. The deployables' config modules call this once at start-up.
 */
export const egressPolicyFromEnv = (
  settings: { allowCidrs: string | undefined; allowPrivate: string | undefined },
  mode: EgressMode,
): { ok: true; policy: EgressPolicy } | { ok: false; problems: string[] } => {
  const problems: string[] = [];
  const allowList = new BlockList();
  const allowCidrs = (settings.allowCidrs ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const cidr of allowCidrs) {
    const p = addCidr(allowList, cidr);
    if (p) problems.push(`${HTTP_ALLOW_CIDRS_VAR}: ${p}`);
  }
  const flag = settings.allowPrivate || undefined;
  if (flag !== undefined && flag !== "true" && flag !== "false")
    problems.push(`${HTTP_ALLOW_PRIVATE_VAR}: must be true or false, not ${shown(flag)}`);
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, policy: { allowPrivate: flag === undefined ? mode === "local" : flag === "true", allowCidrs, allowList } };
};

/** The policy with no operator settings: the mode's default. */
export const defaultEgressPolicy = (mode: EgressMode): EgressPolicy => ({
  allowPrivate: mode === "local",
  allowCidrs: [],
  allowList: new BlockList(),
});
