/**
 * Property-based tests of the in-script socket protocol from a hostile script (issue 15, item 5):
 * garbage lines, any JSON request to any op, half lines, huge lines and a socket closed mid-call.
 * The socket is the real one (startSocketServer over createOpHandler); only the backend, the port to
 * the server, is the agent test kit's fake. Properties: every non-blank line gets exactly one answer,
 * in order, that is either ok or a refusal with a code and a message; nothing crashes the agent or
 * hangs a case (each is bounded); the socket still answers `hello` after each case. Seeded and
 * bounded: a failure prints fast-check's seed and path.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { createConnection, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { FlowError } from "@flowsvc/core";
import { fakeBackend, type Answer } from "./agent-test-kit.js";
import { JournalCursor } from "./journal-cursor.js";
import { silentLogger } from "./logger.js";
import { createOpHandler } from "./socket-ops.js";
import { startSocketServer, type SocketServer } from "./socket-server.js";

const CASE_MS = 10_000;
const MAX_LINE_BYTES = 8 * 1024 * 1024;

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "fa-fuzz-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A gate an op's backend call waits on, so a test can close the socket while the call is in flight. */
interface Gate {
  wait(): Promise<void>;
  open(): void;
  readonly entered: Promise<void>;
}
const gate = (): Gate => {
  let open!: () => void;
  let entered!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  const enteredP = new Promise<void>((r) => (entered = r));
  return {
    wait: () => (entered(), opened),
    open,
    entered: enteredP,
  };
};

let serial = 0;
/** A fresh agent socket: a new job (nothing parked, nothing failed) per case. */
const agent = async (annotateGate?: Gate): Promise<SocketServer> => {
  const backend = fakeBackend({
    // The server refuses what the agent forwards (its own checks are fuzzed over HTTP): only the agent's framing and checks are under test here.
    call: () => Promise.reject(new FlowError("invalid_argument", "refused by the server (the test's backend)")),
    annotate: async () => annotateGate?.wait(),
    record: () => Promise.resolve(undefined as never),
  });
  const handler = createOpHandler({
    agentId: "agt-fuzz",
    runId: "run-fuzz",
    captureIno: 4242,
    cursor: new JournalCursor([]),
    backend,
    outputs: new Map(),
    logger: silentLogger,
    failure: () => undefined,
    onDeterminism: () => undefined,
    onSuspend: () => undefined,
  });
  return startSocketServer(join(dir, `a${serial++}.sock`), handler, silentLogger);
};

/** Writes `bytes` and reads `want` answer lines (each parsed); fails the case when they do not come within CASE_MS. */
const exchange = (path: string, bytes: Buffer, want: number): Promise<{ answers: Answer[]; socket: Socket }> =>
  new Promise((resolve, reject) => {
    const socket = createConnection(path);
    let text = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no ${want} answers within ${CASE_MS} ms; got ${JSON.stringify(text.slice(0, 300))}`));
    }, CASE_MS);
    const finish = (): void => {
      clearTimeout(timer);
      try {
        resolve({
          answers: text
            .split("\n")
            .filter(Boolean)
            .map((l) => JSON.parse(l) as Answer),
          socket,
        });
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    };
    socket.setEncoding("utf8").on("data", (d: string) => {
      text += d;
      if (text.split("\n").length - 1 >= want) finish();
    });
    socket.on("error", (e) => (clearTimeout(timer), reject(e)));
    socket.on("close", () => finish());
    socket.write(bytes);
    if (want === 0) finish();
  });

const assertAnswer = (a: Answer | undefined, what: string): void => {
  assert.ok(a, `${what}: no answer`);
  assert.equal(a["v"], 2, `${what}: ${JSON.stringify(a)}`);
  if (a["ok"] === true) return;
  const error = a["error"] as { code?: unknown; message?: unknown } | undefined;
  assert.equal(a["ok"], false, `${what}: ${JSON.stringify(a)}`);
  assert.equal(typeof error?.code, "string", `${what}: a refusal has a code: ${JSON.stringify(a)}`);
  assert.ok(typeof error?.message === "string" && error.message.length > 0, `${what}: a refusal says what was wrong: ${JSON.stringify(a)}`);
  assert.notEqual(error?.code, "internal", `${what}: hostile input is refused, not an agent failure: ${JSON.stringify(a)}`);
};

const assertHello = async (server: SocketServer): Promise<void> => {
  const { answers, socket } = await exchange(server.path, Buffer.from('{"v":2,"op":"hello"}\n'), 1);
  socket.destroy();
  assert.equal(answers[0]?.["ok"], true, `the socket still answers hello: ${JSON.stringify(answers)}`);
};

const nonBlank = (line: Uint8Array): boolean => Buffer.from(line).toString("utf8").trim() !== "";
const garbageLine = fc.oneof(
  fc.uint8Array({ maxLength: 300 }).map((b) => b.filter((x) => x !== 10)),
  fc.string({ unit: "binary", maxLength: 200 }).map((s) => new TextEncoder().encode(s.replaceAll("\n", ""))),
  fc.jsonValue({ maxDepth: 3 }).map((v) => new TextEncoder().encode(JSON.stringify(v))),
);

void test("the socket is the agent user's alone (0600) from its bind, and the agent's umask is what it was", async () => {
  const umask = process.umask(0o022);
  try {
    const server = await agent();
    try {
      assert.equal((await stat(server.path)).mode & 0o777, 0o600);
      assert.equal(process.umask(0o022), 0o022);
    } finally {
      await server.close();
    }
  } finally {
    process.umask(umask);
  }
});

void test("garbage lines: each non-blank line gets one answer, in order, and the socket lives on", async () => {
  const server = await agent();
  try {
    await fc.assert(
      fc.asyncProperty(fc.array(garbageLine, { minLength: 1, maxLength: 5 }), async (lines) => {
        const bytes = Buffer.concat(lines.flatMap((l) => [Buffer.from(l), Buffer.from("\n")]));
        const want = lines.filter(nonBlank).length;
        const { answers, socket } = await exchange(server.path, bytes, want);
        socket.destroy();
        assert.equal(answers.length, want, `answers for ${want} lines: ${JSON.stringify(answers)}`);
        answers.forEach((a, i) => assertAnswer(a, `line ${i}`));
      }),
      { seed: 1511, numRuns: 200 },
    );
    await assertHello(server);
  } finally {
    await server.close();
  }
});

const OPS = [
  "hello",
  "step",
  "step.complete",
  "output.set",
  "annotate",
  "emit",
  "lock",
  "unlock",
  "activity-collect",
  "activity-wait-all",
  "spawn",
  "state",
  "teleport",
  "",
  "__proto__",
  "constructor",
  "toString",
];
const fieldValue = fc.oneof(
  fc.string({ unit: "binary", maxLength: 80 }),
  fc.integer(),
  fc.double(),
  fc.constantFrom(-1, 0, 2 ** 53, Number.MAX_VALUE, "", "\u0000", "\ud800", "../../etc/passwd", "a".repeat(300)),
  fc.jsonValue({ maxDepth: 3 }),
);
const request = fc.record(
  {
    v: fc.oneof(fc.constant(2), fc.constant(2), fc.jsonValue({ maxDepth: 1 })),
    op: fc.oneof(fc.constantFrom(...OPS), fc.string({ maxLength: 12 })),
    name: fieldValue,
    label: fieldValue,
    position: fieldValue,
    exit: fieldValue,
    stdout_b64: fieldValue,
    values: fc.oneof(fieldValue, fc.dictionary(fc.string({ unit: "binary", maxLength: 300 }), fc.string({ maxLength: 50 }))),
    markdown: fieldValue,
    type: fieldValue,
    key: fieldValue,
    payload: fieldValue,
    command: fieldValue,
  },
  { requiredKeys: ["v", "op"] },
);

void test("any request to any op (the parking ones aside) is answered ok or refused with a code and a message", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(request, { minLength: 1, maxLength: 4 }), async (requests) => {
      const server = await agent();
      try {
        const bytes = Buffer.from(requests.map((r) => `${JSON.stringify(r)}\n`).join(""));
        const { answers, socket } = await exchange(server.path, bytes, requests.length);
        socket.destroy();
        assert.equal(answers.length, requests.length, `answers: ${JSON.stringify(answers)}`);
        answers.forEach((a, i) => assertAnswer(a, `request ${i} (${JSON.stringify(requests[i]).slice(0, 200)})`));
        await assertHello(server);
      } finally {
        await server.close();
      }
    }),
    { seed: 1512, numRuns: 150 },
  );
});

void test("half lines and sockets closed mid-call: the agent answers the next connection", async () => {
  await fc.assert(
    fc.asyncProperty(garbageLine, fc.boolean(), async (half, midCall) => {
      const held = gate();
      const server = await agent(held);
      try {
        const c = createConnection(server.path);
        await new Promise<void>((r) => c.once("connect", () => r()));
        if (midCall) c.write('{"v":2,"op":"annotate","markdown":"x"}\n');
        c.write(Buffer.from(half)); // no newline: a line the agent never finishes reading
        if (midCall) await held.entered;
        c.destroy();
        held.open();
        await assertHello(server);
      } finally {
        held.open();
        await server.close();
      }
    }),
    { seed: 1513, numRuns: 60 },
  );
});

void test("a line over the limit is refused as payload_too_large and the connection closed; the agent lives on", async () => {
  const server = await agent();
  try {
    const huge = Buffer.alloc(MAX_LINE_BYTES + 2, 0x61);
    const { answers } = await exchange(server.path, huge, 1);
    assert.equal((answers[0]?.["error"] as { code: string } | undefined)?.code, "payload_too_large", JSON.stringify(answers));
    assert.match(String((answers[0]?.["error"] as { message: string }).message), /request line is over 8388608 bytes/);
    const justUnder = Buffer.concat([Buffer.from('{"v":2,"op":"hello","pad":"'), Buffer.alloc(1024 * 1024, 0x62), Buffer.from('"}\n')]);
    const { answers: ok, socket } = await exchange(server.path, justUnder, 1);
    socket.destroy();
    assert.equal(ok[0]?.["ok"], true);
    await assertHello(server);
  } finally {
    await server.close();
  }
});
