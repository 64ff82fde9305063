/**
 * Test peer only: a stand-in for the user API on 127.0.0.1, answering what each test scripts, and
 * a runner for the compiled `flow` binary. The end-to-end tests against the real server live in
 * test/src/cli.test.ts.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export interface SeenRequest {
  method: string;
  url: string;
  authorization: string | undefined;
  body: unknown;
}

/** What a route answers: JSON, or a streamed text body the route writes itself. */
export type Reply = { status: number; json?: unknown } | { stream: (res: ServerResponse) => Promise<void> };

export type Route = (req: SeenRequest) => Reply | Promise<Reply>;

export interface FakeFlowsvc {
  url: string;
  seen: SeenRequest[];
  /** Routes by `METHOD /path` (query string excluded); anything else is a flowsvc-shaped 404. */
  routes: Map<string, Route>;
  stop(): Promise<void>;
}

const readBody = async (req: IncomingMessage): Promise<unknown> => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? (JSON.parse(text) as unknown) : undefined;
};

export const startFakeFlowsvc = async (): Promise<FakeFlowsvc> => {
  const seen: SeenRequest[] = [];
  const routes = new Map<string, Route>();
  const server = createServer((req, res) => {
    void (async () => {
      const request: SeenRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        authorization: req.headers.authorization,
        body: await readBody(req),
      };
      seen.push(request);
      const route = routes.get(`${request.method} ${request.url.split("?")[0] ?? ""}`);
      const reply: Reply = route
        ? await route(request)
        : { status: 404, json: { error: { code: "not_found", message: `no route ${request.method} ${request.url}` } } };
      if ("stream" in reply) {
        res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
        await reply.stream(res);
        res.end();
        return;
      }
      if (reply.json === undefined) res.writeHead(reply.status).end();
      else res.writeHead(reply.status, { "content-type": "application/json" }).end(JSON.stringify(reply.json));
    })();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    routes,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
};

export interface FlowResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface FlowOptions {
  env?: Record<string, string | undefined>;
  stdin?: string;
  /** Called with each stdout chunk as it arrives. */
  onStdout?: (chunk: string) => void;
  /** The script to run instead of the binary (flow-imports.test.ts runs tsc's main.js, unbundled). */
  bin?: string;
}

export const FLOW_BIN = fileURLToPath(new URL("./flow.js", import.meta.url));

const homes: string[] = [];

/** A fresh HOME and config path, so no test reads the developer's saved config. */
export const freshHome = async (): Promise<{ home: string; configPath: string }> => {
  const home = await mkdtemp(join(tmpdir(), "flow-cli-test-"));
  homes.push(home);
  return { home, configPath: join(home, "config.json") };
};

/** Deletes every HOME freshHome made; call it from the test file's `after`. */
export const removeHomes = async (): Promise<void> => {
  await Promise.all(homes.splice(0).map((h) => rm(h, { recursive: true, force: true })));
};

/** Runs the compiled binary with exactly the environment given: nothing of the caller's leaks in. */
export const runFlow = async (args: string[], options: FlowOptions = {}): Promise<FlowResult> => {
  const child = spawn(process.execPath, [options.bin ?? FLOW_BIN, ...args], { env: { ...options.env }, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
    options.onStdout?.(chunk);
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  child.stdin.end(options.stdin ?? "");
  const [code] = (await once(child, "close")) as [number | null];
  return { code, stdout, stderr };
};
