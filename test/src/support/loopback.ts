/**
 * The listen and close every stand-in server of the tests does (the protocol peers, the fake
 * Kubernetes API server, a graph's http target): on 127.0.0.1 only, and closed with its keep-alive
 * connections so a test's `after` never waits on a client's idle socket.
 */
import type { Server as HttpServer } from "node:http";
import type { Server as HttpsServer } from "node:https";
import type { AddressInfo } from "node:net";

type LoopbackServer = HttpServer | HttpsServer;

/** Listens on 127.0.0.1 (`port` 0: any free one) and answers the port it got. */
export const listenLoopback = async (server: LoopbackServer, port = 0): Promise<number> => {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
};

/** Closes the server and every connection it still holds; resolves once it is closed. */
export const closeLoopback = async (server: LoopbackServer): Promise<void> => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
};
