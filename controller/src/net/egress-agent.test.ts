/**
 * The connect-time guard against a peer on 127.0.0.1 that counts what reaches it: a name that
 * resolves to loopback and every spelling of a loopback address are refused before any byte
 * leaves under the "private refused" policy and go through under local mode's default; "this
 * host" (0.0.0.0, ::) is refused even locally, though on Linux it would reach the peer.
 * With a resolver answering from a table: a name is judged on all its addresses, and each
 * connection on the one resolution it connects with (a name rebinding to the metadata address).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { request, type Agent } from "undici";
import type { LookupAddress } from "node:dns";
import { EgressRefusedError, createEgressAgent, type Resolve } from "./egress-agent.js";
import { defaultEgressPolicy, egressPolicyFromEnv } from "./egress-policy.js";

let peer: Server;
let port = 0;
let reached = 0;
const hosts: string[] = [];
const agents: Agent[] = [];

before(async () => {
  peer = createServer((req, res) => {
    reached += 1;
    hosts.push(req.headers.host ?? "");
    // Every answer closes its connection: each request is a new connect (and a new lookup).
    res.writeHead(200, { "content-type": "text/plain", connection: "close" }).end("metadata: the node's credentials");
  });
  await new Promise<void>((r) => peer.listen(0, "127.0.0.1", r));
  port = (peer.address() as AddressInfo).port;
});
after(async () => {
  await Promise.all(agents.map((a) => a.close()));
  peer.closeAllConnections();
  peer.close();
});

const agentFor = (policy: Parameters<typeof createEgressAgent>[0], resolve?: Resolve): Agent => {
  const a = createEgressAgent(policy, resolve);
  agents.push(a);
  return a;
};

/** The error a request through `agent` fails with, or undefined when it was answered. */
const refusalOf = async (agent: Agent, url: string): Promise<unknown> => {
  try {
    const res = await request(url, { dispatcher: agent });
    await res.body.text();
    return undefined;
  } catch (err) {
    return err;
  }
};

const LOOPBACK_SPELLINGS = (p: number): string[] => [
  `http://localhost:${p}/latest/meta-data/`,
  `http://127.0.0.1:${p}/`,
  `http://127.1:${p}/`,
  `http://2130706433:${p}/`,
  `http://0x7f000001:${p}/`,
  `http://017700000001:${p}/`,
  `http://%31%32%37.0.0.1:${p}/`,
  `http://[::ffff:127.0.0.1]:${p}/`,
  `http://[0:0:0:0:0:ffff:7f00:1]:${p}/`,
];

void test("private refused: a name resolving to loopback and every loopback spelling fail at connect, and the peer gets nothing", async () => {
  const strict = agentFor(defaultEgressPolicy("kubernetes"));
  const before = reached;
  const err = await refusalOf(strict, `http://localhost:${port}/latest/meta-data/iam/security-credentials/?token=secret-in-query`);
  assert.ok(err instanceof EgressRefusedError, String(err));
  assert.match(
    err.message,
    /^localhost resolves to (127\.0\.0\.1|::1), a loopback address; http nodes may not reach loopback addresses here \(set FLOWSVC_HTTP_ALLOW_CIDRS or FLOWSVC_HTTP_ALLOW_PRIVATE\)$/,
  );
  for (const url of LOOPBACK_SPELLINGS(port)) assert.ok((await refusalOf(strict, url)) instanceof EgressRefusedError, url);
  // TLS connects through the same guarded lookup: refused before any handshake.
  assert.ok((await refusalOf(strict, `https://localhost:${port}/`)) instanceof EgressRefusedError);
  assert.equal(reached, before, "no request reached the peer");
});

void test("local mode's default: the same destinations are answered", async () => {
  const local = agentFor(defaultEgressPolicy("local"));
  const before = reached;
  for (const url of LOOPBACK_SPELLINGS(port)) assert.equal(await refusalOf(local, url), undefined, url);
  assert.equal(reached, before + LOOPBACK_SPELLINGS(port).length);
});

void test("'this host' (0.0.0.0, ::) is refused even in local mode, although it would reach a loopback listener", async () => {
  const local = agentFor(defaultEgressPolicy("local"));
  const before = reached;
  for (const url of [`http://0.0.0.0:${port}/`, `http://0:${port}/`, `http://[::]:${port}/`, `http://[::ffff:0.0.0.0]:${port}/`]) {
    const err = await refusalOf(local, url);
    assert.ok(err instanceof EgressRefusedError, `${url}: ${String(err)}`);
    assert.match(err.message, /unspecified \("this host"\) address; http nodes may never reach/);
  }
  assert.equal(reached, before);
});

void test("an operator's range opens exactly that range under the private-refused default", async () => {
  const r = egressPolicyFromEnv({ allowCidrs: "127.0.0.1/32", allowPrivate: "false" }, "kubernetes");
  assert.ok(r.ok);
  const agent = agentFor(r.policy);
  const before = reached;
  assert.equal(await refusalOf(agent, `http://127.0.0.1:${port}/`), undefined);
  assert.ok((await refusalOf(agent, `http://127.0.0.2:${port}/`)) instanceof EgressRefusedError);
  assert.equal(reached, before + 1);
});

/** A resolver answering from a table (a name's answers in turn, the last one repeated), counting its calls. */
const answering = (table: Record<string, string[][]>): { resolve: Resolve; calls: string[] } => {
  const calls: string[] = [];
  const resolve: Resolve = (hostname) => {
    const turns = table[hostname] ?? [];
    const answer = turns[Math.min(calls.filter((c) => c === hostname).length, turns.length - 1)] ?? [];
    calls.push(hostname);
    if (answer.length === 0) return Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }));
    return Promise.resolve(answer.map((address): LookupAddress => ({ address, family: address.includes(":") ? 6 : 4 })));
  };
  return { resolve, calls };
};

void test("a name is judged on every address it resolves to: one private or metadata answer among public ones refuses it", async () => {
  const { resolve } = answering({
    "api.internal": [["10.0.0.5"]],
    "mixed.example": [["203.0.113.7", "10.0.0.5"]],
    "meta.example": [["::ffff:169.254.169.254"]],
  });
  const strict = agentFor(defaultEgressPolicy("kubernetes"), resolve);
  const local = agentFor(defaultEgressPolicy("local"), resolve);
  const messageOf = async (agent: Agent, url: string): Promise<string> => {
    const err = await refusalOf(agent, url);
    assert.ok(err instanceof EgressRefusedError, `${url}: ${String(err)}`);
    return err.message;
  };
  assert.equal(
    await messageOf(strict, "http://api.internal/v1/items?token=t"),
    "api.internal resolves to 10.0.0.5, a private address; http nodes may not reach private addresses here (set FLOWSVC_HTTP_ALLOW_CIDRS or FLOWSVC_HTTP_ALLOW_PRIVATE)",
  );
  assert.match(await messageOf(strict, "https://mixed.example/"), /^mixed\.example resolves to 10\.0\.0\.5, a private address;/);
  assert.match(
    await messageOf(local, "http://meta.example/latest/meta-data/"),
    /^meta\.example resolves to ::ffff:169\.254\.169\.254 \(IPv4 169\.254\.169\.254\), a cloud instance metadata address; http nodes may never reach/,
  );
});

void test("each connection is judged on the one resolution it connects with: a name that rebinds to the metadata address is refused on the next connect", async () => {
  const { resolve, calls } = answering({ "rebind.test": [["127.0.0.1"], ["169.254.169.254"]] });
  const local = agentFor(defaultEgressPolicy("local"), resolve);
  const before = reached;
  assert.equal(await refusalOf(local, `http://rebind.test:${port}/`), undefined);
  assert.equal(hosts.at(-1), `rebind.test:${port}`, "the request went to the address the name resolved to, with its own Host");
  const err = await refusalOf(local, `http://rebind.test:${port}/`);
  assert.ok(err instanceof EgressRefusedError, String(err));
  assert.match(err.message, /^rebind\.test resolves to 169\.254\.169\.254, a cloud instance metadata address/);
  assert.deepEqual(calls, ["rebind.test", "rebind.test"], "one resolution per connection, no second look");
  assert.equal(reached, before + 1);
});
