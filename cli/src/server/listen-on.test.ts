import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { FlowError } from "@flowsvc/core";
import { listenOn } from "./run-server.js";

/** A real HTTP server's listen, as Fastify's app.listen calls it. */
const app = (servers: Server[]) => ({
  listen: async ({ host, port }: { host: string; port: number }): Promise<string> => {
    const server = createServer();
    servers.push(server);
    server.listen(port, host);
    await Promise.race([once(server, "listening"), once(server, "error").then(([err]) => Promise.reject(err as Error))]);
    return `http://${host}:${(server.address() as AddressInfo).port}`;
  },
});

void test("a listen the settings make fail is a config error naming the setting: port in use, a host name that does not resolve, an address not ours", async () => {
  const servers: Server[] = [];
  try {
    const first = await listenOn(app(servers), { host: "127.0.0.1", port: 0 });
    const port = Number(new URL(first).port);
    const refusal = async (host: string, p: number): Promise<FlowError> => {
      try {
        await listenOn(app(servers), { host, port: p });
      } catch (err) {
        assert.ok(err instanceof FlowError, String(err));
        assert.equal(err.code, "config");
        return err;
      }
      assert.fail(`listened on ${host}:${p}`);
    };
    assert.match((await refusal("127.0.0.1", port)).message, new RegExp(`^port ${port} on 127\\.0\\.0\\.1 is already in use$`));
    const unknown = await refusal("not-a-host.invalid", 0);
    assert.match(unknown.message, /^cannot listen on --host not-a-host\.invalid: no such host name \(E[A-Z_]+\)$/);
    assert.match(unknown.hint ?? "", /--host \(FLOWSVC_HOST\)/);
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine.
    assert.match((await refusal("192.0.2.1", 0)).message, /^cannot listen on --host 192\.0\.2\.1: it is not an address of this machine$/);
  } finally {
    for (const s of servers) s.close();
  }
});
