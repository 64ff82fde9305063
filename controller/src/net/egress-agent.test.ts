/**
 * The connect-time guard against a peer on 127.0.0.1 that counts what reaches it: a name that
 * resolves to loopback and every spelling of a loopback address are refused before any byte
 * leaves under the "private refused" policy and go through under local mode's default; "this
 * host" (0.0.0.0, ::) is refused even locally, though on Linux it would reach the peer.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { request, type Agent } from "undici";
import { EgressRefusedError, createEgressAgent } from "./egress-agent.js";
import { defaultEgressPolicy, egressPolicyFromEnv } from "./egress-policy.js";

let peer: Server;
let port = 0;
let reached = 0;
const agents: Agent[] = [];

before(async () => {
  peer = createServer((_req, res) => {
    reached += 1;
    res.writeHead(200, { "content-type": "text/plain" }).end("metadata: the node's credentials");
  });
  await new Promise<void>((r) => peer.listen(0, "127.0.0.1", r));
  port = (peer.address() as AddressInfo).port;
});
after(async () => {
  await Promise.all(agents.map((a) => a.close()));
  peer.closeAllConnections();
  peer.close();
});

const agentFor = (policy: Parameters<typeof createEgressAgent>[0]): Agent => {
  const a = createEgressAgent(policy);
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
