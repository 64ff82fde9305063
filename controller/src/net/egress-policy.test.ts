/** The egress rule as pure functions: every spelling of an address lands in its class; the settings refuse bad values by name. */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  classifyAddress,
  defaultEgressPolicy,
  egressPolicyFromEnv,
  egressRefusal,
  embeddedIpv4,
  refusalMessage,
  type AddressClass,
  type EgressPolicy,
} from "./egress-policy.js";

const policyOf = (allowCidrs: string | undefined, allowPrivate: string | undefined, mode: "local" | "kubernetes"): EgressPolicy => {
  const r = egressPolicyFromEnv({ allowCidrs, allowPrivate }, mode);
  assert.ok(r.ok, JSON.stringify(r));
  return r.policy;
};

void test("each class of address, in IPv4, IPv6 and the IPv6 forms that carry an IPv4 address", () => {
  const cases: Array<[string, AddressClass]> = [
    ["169.254.169.254", "metadata"],
    ["169.254.170.2", "link-local"],
    ["fd00:ec2::254", "metadata"],
    ["FD00:EC2:0:0:0:0:0:254", "metadata"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["febf:ffff::1", "link-local"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["::", "unspecified"],
    ["0:0:0:0:0:0:0:0", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["ff02::1", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["240.0.0.1", "reserved"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["::1", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["10.0.0.5", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["fec0::1", "private"],
    ["100.64.0.1", "shared"],
    ["100.127.255.255", "shared"],
    // The IPv4-mapped, -translated, -compatible and NAT64 forms are judged as the IPv4 address.
    ["::ffff:169.254.169.254", "metadata"],
    ["::ffff:a9fe:a9fe", "metadata"],
    ["0:0:0:0:0:ffff:a9fe:a9fe", "metadata"],
    ["::ffff:0:a9fe:a9fe", "metadata"],
    ["::169.254.169.254", "metadata"],
    ["::a9fe:a9fe", "metadata"],
    ["64:ff9b::169.254.169.254", "metadata"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:10.1.2.3", "private"],
    ["::ffff:0.0.0.0", "unspecified"],
    ["::ffff:224.0.0.1", "multicast"],
    // Gateway forms whose IPv4 bits sit where the prefix decides: refused whole (metadata through each).
    ["64:ff9b:1:a9fe:a9:fe00::", "reserved"],
    ["64:ff9b:1::a9fe:a9fe", "reserved"],
    ["64:FF9B:1:FFFF:FFFF:FFFF:FFFF:FFFF", "reserved"],
    ["2002:a9fe:a9fe::1", "reserved"],
    ["2002::", "reserved"],
    ["2001:0:4136:e378:8000:63bf:5601:5601", "reserved"],
    // Their public neighbours.
    ["64:ff9b:2::1", "public"],
    ["2003::1", "public"],
    ["2001:1::1", "public"],
    ["2001:4860:4860::8888", "public"],
    // Public neighbours of the ranges.
    ["169.253.255.255", "public"],
    ["172.32.0.1", "public"],
    ["100.128.0.1", "public"],
    ["11.0.0.1", "public"],
    ["8.8.8.8", "public"],
    ["2606:4700::1111", "public"],
    ["::ffff:8.8.8.8", "public"],
    ["fd00:ec2::253", "private"],
    // Not an address at all: never connected to.
    ["not-an-ip", "reserved"],
    ["169.254.169.254\u0000", "reserved"],
    ["", "reserved"],
  ];
  for (const [ip, want] of cases) assert.equal(classifyAddress(ip), want, ip);
  assert.equal(embeddedIpv4("::ffff:a9fe:a9fe"), "169.254.169.254");
  assert.equal(embeddedIpv4("::1"), undefined);
  assert.equal(embeddedIpv4("2606:4700::1111"), undefined);
});

void test("every hostile spelling of the metadata address reaches the guard as one address, and it is refused in either mode", () => {
  // The guard sees the host as the URL parser (undici's too) leaves it: these spellings all become one address.
  const spellings = [
    "http://169.254.169.254/latest/meta-data/",
    "http://2852039166/",
    "http://0251.0376.0251.0376/",
    "http://0xa9fea9fe/",
    "http://0xA9.0xFE.0xA9.0xFE/",
    "http://169.254.43518/",
    "http://%31%36%39.254.169.254/",
    "http://169.254.169.254./",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[0:0:0:0:0:ffff:a9fe:a9fe]/",
    "http://[fd00:ec2::254]/",
    "https://user:pw@169.254.169.254:443/?token=x",
  ];
  for (const mode of ["local", "kubernetes"] as const) {
    const policy = defaultEgressPolicy(mode);
    for (const spelling of spellings) {
      const host = new URL(spelling).hostname.replace(/^\[(.*)\]$/, "$1");
      const r = egressRefusal(policy, host);
      assert.equal(r?.class, "metadata", `${mode}: ${spelling} (host ${host})`);
    }
  }
  for (const bad of ["http://169.254.169.254\u0000/", "http://127.0.0.1:99999/", "http://[::ffff:a9fe:a9fe/", "http://1.2.3.4.5.6/"])
    assert.equal(URL.parse(bad), null, `${JSON.stringify(bad)} is no URL, so nothing is fetched`);
});

void test("loopback, private and CGNAT: refused by default in Kubernetes mode, allowed by default in local mode", () => {
  const local = defaultEgressPolicy("local");
  const kube = defaultEgressPolicy("kubernetes");
  for (const ip of ["127.0.0.1", "::1", "10.0.0.5", "192.168.0.10", "100.64.1.1", "fd00::5", "::ffff:127.0.0.1"]) {
    assert.equal(egressRefusal(local, ip), undefined, `local allows ${ip}`);
    assert.ok(egressRefusal(kube, ip), `kubernetes refuses ${ip}`);
  }
  for (const ip of ["169.254.169.254", "fe80::1", "0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "fd00:ec2::254"])
    assert.ok(egressRefusal(local, ip), `local mode refuses ${ip} too`);
  for (const ip of ["8.8.8.8", "2606:4700::1111"]) assert.equal(egressRefusal(kube, ip), undefined);
});

void test("the operator's settings: ALLOW_PRIVATE flips the default, ALLOW_CIDRS opens exactly its ranges (mapped forms included)", () => {
  assert.equal(policyOf(undefined, "true", "kubernetes").allowPrivate, true);
  assert.equal(policyOf(undefined, "false", "local").allowPrivate, false);
  assert.equal(policyOf("", "", "local").allowPrivate, true);
  const p = policyOf(" 10.20.0.0/16 , fd00:1::/32,192.0.2.7,", undefined, "kubernetes");
  assert.deepEqual(p.allowCidrs, ["10.20.0.0/16", "fd00:1::/32", "192.0.2.7"]);
  for (const ip of ["10.20.3.4", "::ffff:10.20.3.4", "fd00:1::9", "192.0.2.7"]) assert.equal(egressRefusal(p, ip), undefined, ip);
  for (const ip of ["10.21.0.1", "fd00:2::1", "127.0.0.1"]) assert.equal(egressRefusal(p, ip)?.class !== undefined, true, ip);
  // An explicit range is the only way to reach an always-refused class.
  const meta = policyOf("169.254.169.254/32", "false", "kubernetes");
  assert.equal(egressRefusal(meta, "169.254.169.254"), undefined);
  assert.equal(egressRefusal(meta, "169.254.169.253")?.class, "link-local");
});

void test("bad settings are refused at start-up, each naming its variable and the bad value", () => {
  const r = egressPolicyFromEnv(
    { allowCidrs: "10.0.0.0/8,10.0.0.0/33,fd00::/129,intranet,1.2.3.4/08,0xa/8,1.2.3.4/", allowPrivate: "yes" },
    "local",
  );
  assert.ok(!r.ok);
  assert.deepEqual(r.problems, [
    'FLOWSVC_HTTP_ALLOW_CIDRS: "10.0.0.0/33" is not a CIDR: the prefix length must be a whole number from 0 to 32',
    'FLOWSVC_HTTP_ALLOW_CIDRS: "fd00::/129" is not a CIDR: the prefix length must be a whole number from 0 to 128',
    'FLOWSVC_HTTP_ALLOW_CIDRS: "intranet" is not a CIDR (an IPv4 or IPv6 address, then /prefix length)',
    'FLOWSVC_HTTP_ALLOW_CIDRS: "1.2.3.4/08" is not a CIDR: the prefix length must be a whole number from 0 to 32',
    'FLOWSVC_HTTP_ALLOW_CIDRS: "0xa/8" is not a CIDR (an IPv4 or IPv6 address, then /prefix length)',
    'FLOWSVC_HTTP_ALLOW_CIDRS: "1.2.3.4/" is not a CIDR: the prefix length must be a whole number from 0 to 32',
    'FLOWSVC_HTTP_ALLOW_PRIVATE: must be true or false, not "yes"',
  ]);
  const hostile = egressPolicyFromEnv({ allowCidrs: "10.0.0.0/8\u0000,1e400/8", allowPrivate: "TRUE" }, "kubernetes");
  assert.ok(!hostile.ok);
  assert.equal(hostile.problems.length, 3);
  assert.match(hostile.problems[0]!, /^FLOWSVC_HTTP_ALLOW_CIDRS: "10\.0\.0\.0\/8\\u0000" is not a CIDR/);
});

void test("the refusal names the host, the address, its class and the setting; never a path or query", () => {
  const kube = defaultEgressPolicy("kubernetes");
  assert.equal(
    refusalMessage("api.internal", egressRefusal(kube, "10.0.0.5")!),
    "api.internal resolves to 10.0.0.5, a private address; http nodes may not reach private addresses here (set FLOWSVC_HTTP_ALLOW_CIDRS or FLOWSVC_HTTP_ALLOW_PRIVATE)",
  );
  assert.equal(
    refusalMessage("169.254.169.254", egressRefusal(kube, "169.254.169.254")!),
    "169.254.169.254 is a cloud instance metadata address; http nodes may never reach cloud instance metadata addresses unless the operator allows the range (FLOWSVC_HTTP_ALLOW_CIDRS)",
  );
  assert.equal(
    refusalMessage("::ffff:a9fe:a9fe", egressRefusal(kube, "::ffff:a9fe:a9fe")!),
    "::ffff:a9fe:a9fe (IPv4 169.254.169.254) is a cloud instance metadata address; http nodes may never reach cloud instance metadata addresses unless the operator allows the range (FLOWSVC_HTTP_ALLOW_CIDRS)",
  );
  assert.match(refusalMessage("[fe80::1]", egressRefusal(kube, "fe80::1")!), /^fe80::1 is a link-local address;/);
});
