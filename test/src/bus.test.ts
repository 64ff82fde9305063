/**
 * The event bus end to end (issue 4: emit, events, catalog, handlers), through the real server, the
 * real `flow` CLI and HTTP on 127.0.0.1. Handler runs need the `polyglot` capability, so the server
 * runs a polyglot agent pool. The tests share one project and run one after another: each removes
 * its handlers and lets its handler runs finish, since the in-flight limit counts the project's.
 */
import { after, afterEach, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { derivedId, isTerminalStatus } from "@flowsvc/core";
import { startTestServer } from "./support/server.js";
import { waitFor as waitUntil } from "./support/wait.js";
import type { CliResult, TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { parseRawAnswer, rawRequest } from "./support/raw-http.js";
import { ok, runKit, type RunView } from "./support/runs.js";

let server: TestServer;
let dir: string;

before(async () => {
  server = await startTestServer({ env: { FLOWSVC_AGENT_POOLS: "polyglot:2" } });
  dir = await scriptDir("flowsvc-bus-test-");
});

/** Every test leaves no handler behind, even when it failed half way. */
afterEach(async () => {
  const listed = await http("GET", "handlers");
  for (const h of listed.body as unknown as Array<{ name: string }>) await http("DELETE", `handlers/${h.name}`);
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const MiB = 1024 * 1024;
const EVENT_ID = /^evt-[0-9a-z]{26}$/;

interface EventView {
  id: string;
  type: string;
  key: string | null;
  payload: unknown;
  source_run_id: string | null;
  generation: number;
}

/** docs/internals.md, Identifiers: `run-` and the first 26 base32 characters of sha256(event id NUL handler name). */
const handlerRun = (eventId: string, handler: string): string =>
  derivedId("run", createHash("sha256").update(`${eventId}\u0000${handler}`).digest());

const scoped = (path: string): string => `${server.url}/api/v1/orgs/default/projects/default/${path}`;

/** What the emit and handler routes answer: the event, or an error body. */
interface Answer {
  id: string;
  type: string;
  handler_runs: string[];
  error: { code: string; message: string };
}

/** A raw HTTP call to the user API: status and parsed body. */
const http = async (method: string, path: string, body?: string | object): Promise<{ status: number; body: Answer }> => {
  const res = await fetch(scoped(path), {
    method,
    headers: { authorization: `Bearer ${server.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Answer };
};

const { json } = runKit(
  () => server,
  () => dir,
);

const emit = async (type: string, ...args: string[]): Promise<string> => {
  const id = ok(await server.cli(["emit", type, ...args])).stdout.trim();
  assert.match(id, EVENT_ID, "flow emit prints the event id alone");
  return id;
};

const eventsOf = (type: string): Promise<EventView[]> => json<EventView[]>(["events", "ls", "--type", type, "--limit", "100"]);

/** The run, or undefined when there is none with that id. */
const runOf = async (id: string): Promise<RunView | undefined> => {
  const r = await http("GET", `runs/${id}`);
  return r.status === 404 ? undefined : (r.body as unknown as RunView);
};

const waitFor = (what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> => waitUntil(what, check, timeoutMs);

const finished = async (id: string): Promise<RunView> => {
  let run: RunView | undefined;
  await waitFor(`run ${id} to finish`, async () => isTerminalStatus((run = await runOf(id))?.status ?? ""));
  return run!;
};

/** Registers a handler with the CLI from a script text; answers the CLI result. */
const setHandler = async (name: string, source: string, args: string[], file = `${name}.sh`): Promise<CliResult> => {
  const path = join(dir, file);
  await writeFile(path, source);
  return server.cli(["handler", "set", name, path, ...args]);
};

const removeHandlers = async (...names: string[]): Promise<void> => {
  for (const name of names) ok(await server.cli(["handler", "rm", name]));
};

void test("reserved and malformed types are refused with exit 2 and a message; nothing is recorded", async () => {
  for (const type of ["push", "manual", "schedule.tick", "spawn", "run.failed", "run.started", "flow.anything", "Run.Failed"]) {
    const r = await server.cli(["emit", type]);
    assert.equal(r.code, 2, `${type}: ${r.stderr}`);
    assert.match(r.stderr, /is reserved for the platform/, type);
    const h = await http("POST", "events", { type });
    assert.equal(h.status, 400, `${type} over HTTP`);
    assert.match(h.body.error.message, /reserved/);
  }
  for (const type of ["", "has space", "x".repeat(65), "émoji", "a/b"]) {
    const r = await server.cli(["emit", type]);
    assert.equal(r.code, 2, `${JSON.stringify(type)}: ${r.stderr}`);
    assert.match(r.stderr, /must be 1-64 characters from \[A-Za-z0-9._-\]/);
    assert.equal((await http("POST", "events", { type })).status, 400);
  }
  const bad = await server.cli(["emit", "deploy.requested", "--payload", "{not json"]);
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(bad.stderr, /--payload/);
  assert.match(bad.stderr, /not valid JSON/);
  const types = (await json<EventView[]>(["events", "ls", "--limit", "1000"])).map((e) => e.type);
  assert.deepEqual(
    types.filter((t) => t !== "manual" && !t.startsWith("run.")),
    [],
    "no refused emit left a row",
  );

  // A well-formed emit: the id alone on stdout, the key and payload recorded; no --payload is null.
  const id = await emit("deploy.requested", "--key", "acme/web", "--payload", '{"ref":"main","n":3}');
  const event = await json<EventView>(["events", "show", id]);
  assert.deepEqual([event.type, event.key, event.payload], ["deploy.requested", "acme/web", { ref: "main", n: 3 }]);
  const bare = await json<EventView>(["events", "show", await emit("deploy.requested")]);
  assert.equal(bare.payload, null);
  assert.equal(bare.key, null);
  const created = await http("POST", "events", { type: "deploy.requested", payload: [1, "two"] });
  assert.equal(created.status, 201);
  assert.equal(created.body.type, "deploy.requested");
  assert.match(created.body.id, EVENT_ID);
});

void test("an emit body of exactly 2 MiB is accepted and one byte more is a 413 that records nothing", async () => {
  const head = '{"type":"blob.sized","payload":"';
  const tail = '"}';
  const body = (size: number): string => head + "x".repeat(size - head.length - tail.length) + tail;
  assert.equal(Buffer.byteLength(body(2 * MiB)), 2 * MiB);
  const accepted = await http("POST", "events", body(2 * MiB));
  assert.equal(accepted.status, 201, JSON.stringify(accepted.body));
  // One byte more, declared and not sent: the server answers 413 on Content-Length and closes, and a
  // client still writing would race that close (EPIPE) instead of reading the answer.
  const over = parseRawAnswer<Answer>(
    await rawRequest(
      server.url,
      `POST ${new URL(scoped("events")).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.token}\r\nContent-Type: application/json\r\nContent-Length: ${2 * MiB + 1}\r\nConnection: close\r\n\r\n`,
    ),
  );
  assert.equal(over.status, 413);
  assert.equal(over.body.error.code, "payload_too_large");
  const recorded = await eventsOf("blob.sized");
  assert.deepEqual(
    recorded.map((e) => e.id),
    [accepted.body.id],
  );
  assert.equal((recorded[0]!.payload as string).length, 2 * MiB - head.length - tail.length, "the payload is stored whole");
});

void test("a handler whose `when` reads an absent field declines: the event is recorded, no run starts, the server logs it", async () => {
  ok(await setHandler("reads-absent", "echo should not run\n", ["--on", "probe.absent", "--when", "event.payload.missing == 1"]));
  const id = await emit("probe.absent", "--payload", '{"x":1}');
  assert.equal((await json<EventView>(["events", "show", id])).type, "probe.absent", "the event is recorded");
  const declined = async (): Promise<boolean> =>
    (await readFile(join(server.dataDir, "server.log"), "utf8").catch(() => ""))
      .split("\n")
      .some((l) => l.includes("handler declined the event") && l.includes('"handler":"reads-absent"') && l.includes(id));
  await waitFor("the decline to be logged in server.log", declined, 10_000);
  assert.equal(await runOf(handlerRun(id, "reads-absent")), undefined, "no run started");
});

void test("a has()-guarded `when` runs the handler only for events that match it", async () => {
  ok(
    await setHandler("big-orders", `echo "$CI_TRIGGER_EVENT_ID" >> ${dir}/big-orders\n`, [
      "--on",
      "order.*",
      "--when",
      "has(event.payload.x) && event.payload.x > 1",
    ]),
  );
  const big = await emit("order.created", "--payload", '{"x":5}');
  const small = await emit("order.created", "--payload", '{"x":1}');
  const none = await emit("order.updated", "--payload", '{"y":9}');
  const other = await emit("invoice.created", "--payload", '{"x":7}');
  assert.equal((await finished(handlerRun(big, "big-orders"))).status, "succeeded");
  for (const id of [small, none, other]) assert.equal(await runOf(handlerRun(id, "big-orders")), undefined, id);
  assert.equal(await readFile(join(dir, "big-orders"), "utf8"), `${big}\n`);
});

void test("every matching handler runs in its own run with the derived id, and reads the whole envelope and CI_TRIGGER_*", async () => {
  const probe = (name: string): string => `
cp "$FLOW_INPUT_FILE" ${dir}/env-${name}.json
echo "$CI_TRIGGER_EVENT $CI_TRIGGER_EVENT_ID $FLOW_WORKFLOW_ID" > ${dir}/vars-${name}
`;
  ok(await setHandler("fan-exact", probe("fan-exact"), ["--on", "fanout.go", "--tag", "fan"]));
  const py = await setHandler("fan-prefix", probe("fan-prefix"), ["--on", "fanout.*"], "fan-prefix.py");
  ok(py);
  assert.match(py.stderr, /fan-prefix\.py will run under `bash -eu`/);
  ok(await setHandler("fan-list", probe("fan-list"), ["--on", "nothing.here,fanout.go"]));
  ok(await setHandler("fan-never", probe("fan-never"), ["--on", "fanout.stop"]));
  // Larger than one argv string may be (128 KiB), so it goes over HTTP; listeners get it whole.
  const payload = { n: 1, nested: { list: [1, "two", null], big: "y".repeat(MiB) } };
  const sent = await http("POST", "events", { type: "fanout.go", key: "acme/web", payload });
  assert.equal(sent.status, 201);
  const id = sent.body.id;
  assert.deepEqual([...sent.body.handler_runs].sort(), ["fan-exact", "fan-prefix", "fan-list"].map((n) => handlerRun(id, n)).sort());

  for (const name of ["fan-exact", "fan-prefix", "fan-list"]) {
    const runId = handlerRun(id, name);
    const run = await finished(runId);
    assert.equal(run.status, "succeeded", `${name}: ${run.error ?? ""}`);
    const envelope = JSON.parse(await readFile(join(dir, `env-${name}.json`), "utf8")) as Record<string, unknown>;
    assert.deepEqual(envelope, { type: "fanout.go", event: id, key: "acme/web", payload }, `${name} reads the whole envelope`);
    assert.equal(await readFile(join(dir, `vars-${name}`), "utf8"), `fanout.go ${id} ${runId}\n`);
  }
  assert.deepEqual((await runOf(handlerRun(id, "fan-exact")))?.tags, ["fan"]);
  assert.equal(await runOf(handlerRun(id, "fan-never")), undefined);
});

void test("flow handler init prints a router that works as a handler; ls, show and rm manage it", async () => {
  const script = ok(await server.cli(["handler", "init"])).stdout;
  assert.match(script, /^#!\/usr\/bin\/env bash\n/);
  assert.match(script, /case "\$CI_TRIGGER_EVENT" in/);
  ok(await setHandler("router", script, ["--on", "deploy.requested,release.published"]));
  const id = await emit("deploy.requested", "--key", "acme/web", "--payload", '{"environment":"prod"}');
  const runId = handlerRun(id, "router");
  await finished(runId);
  const log = ok(await server.cli(["follow", runId])).stdout;
  assert.match(log, /deploying to prod/);

  const listed = await json<Array<{ name: string; on: string[]; reaction: { filename: string; size: number } }>>(["handler", "ls"]);
  assert.deepEqual(
    listed.map((h) => [h.name, h.on, h.reaction.filename, h.reaction.size]),
    [["router", ["deploy.requested", "release.published"], "router.sh", Buffer.byteLength(script)]],
  );
  assert.match(
    ok(await server.cli(["handler", "show", "router"])).stdout,
    /on:\s+deploy\.requested,release\.published[\s\S]*case "\$CI_TRIGGER_EVENT" in/,
  );
  assert.match(ok(await server.cli(["handler", "init", "on-failure"])).stdout, /--on run\.failed/);
  await removeHandlers("router");
  const gone = await server.cli(["handler", "show", "router"]);
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /handler router not found/);
});

void test("flow handler set refuses a CEL that does not compile with the compiler's message and position, and a reaction that is not one file, graph or node", async () => {
  const bad = await setHandler("bad-cel", "true\n", ["--on", "x.y", "--when", "event.payload.x >"]);
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(bad.stderr, /^error: when: .+ at line 1, column \d+$/m);
  const pattern = await setHandler("bad-on", "true\n", ["--on", "has space"]);
  assert.equal(pattern.code, 2);
  assert.match(pattern.stderr, /--on/);
  for (const [args, message] of [
    [["--as", "yaml"], /reaction\.source: line 1, column 1: /],
    [["--graph", "g"], /give one reaction/],
    [["--node", "http", "--config", "{}"], /give one reaction/],
  ] as const) {
    const r = await setHandler("later", "true\n", ["--on", "x.y", ...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
  assert.deepEqual(await json<unknown[]>(["handler", "ls"]), [], "nothing was stored");
});

void test("the seventeenth handler run in flight is refused with 429 and records nothing, until the backlog drains", async () => {
  const slow = `while [ ! -e ${dir}/burst-release ]; do sleep 0.1; done\n`;
  const names = Array.from({ length: 17 }, (_, i) => `burst-${String(i + 1).padStart(2, "0")}`);
  for (const name of names) {
    const r = await http("PUT", `handlers/${name}`, {
      on: ["load.burst"],
      reaction: { kind: "script", source: slow, filename: "slow.sh" },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  const seventeen = await server.cli(["emit", "load.burst"]);
  assert.equal(seventeen.code, 1, seventeen.stderr);
  assert.match(seventeen.stderr, /at most 16/);
  assert.deepEqual(await eventsOf("load.burst"), [], "a refused emit records nothing");

  await removeHandlers("burst-17");
  const sixteen = await http("POST", "events", { type: "load.burst" });
  assert.equal(sixteen.status, 201);
  assert.equal(sixteen.body.handler_runs.length, 16);
  ok(await setHandler("burst-more", slow, ["--on", "load.more"]));
  const refused = await http("POST", "events", { type: "load.more" });
  assert.equal(refused.status, 429);
  assert.equal(refused.body.error.code, "limit_exceeded");
  assert.deepEqual(await eventsOf("load.more"), []);

  await writeFile(join(dir, "burst-release"), "");
  for (const run of sixteen.body.handler_runs) assert.equal((await finished(run)).status, "succeeded");
  const drained = await emit("load.more");
  assert.equal((await finished(handlerRun(drained, "burst-more"))).status, "succeeded");
});

void test("seventeen emits at once start at most sixteen handler runs: the others fail with 429 and record nothing", async () => {
  const release = join(dir, "race-release");
  ok(await setHandler("race", `while [ ! -e ${release} ]; do sleep 0.1; done\n`, ["--on", "load.race"]));
  const answers = await Promise.all(Array.from({ length: 20 }, () => http("POST", "events", { type: "load.race" })));
  await writeFile(release, "");
  const accepted = answers.filter((a) => a.status === 201);
  assert.deepEqual(
    answers.filter((a) => a.status !== 201).map((a) => a.status),
    [429, 429, 429, 429],
  );
  assert.equal(accepted.length, 16);
  assert.equal((await eventsOf("load.race")).length, 16, "a refused emit records nothing");
  for (const a of accepted) assert.equal((await finished(a.body.handler_runs[0]!)).status, "succeeded");
});

void test("the catalog lists platform types with descriptions, an empty declared section, and seen types with their latest payload", async () => {
  await emit("catalog.sample", "--payload", '{"a":1}');
  await emit("catalog.sample", "--key", "acme/web", "--payload", '{"a":2}');
  assert.equal((await http("POST", "events", { type: "catalog.large", payload: "z".repeat(100_000) })).status, 201);
  const catalog = await json<{
    platform: Array<{ type: string; description: string }>;
    declared: unknown[];
    seen: Array<{ type: string; key: string | null; sample_payload: unknown; sample_omitted: boolean }>;
  }>(["events", "catalog"]);
  for (const type of ["run.started", "run.succeeded", "run.failed", "run.cancelled", "run.awaiting", "run.wait_expired", "manual"]) {
    assert.ok(catalog.platform.find((p) => p.type === type)?.description, type);
  }
  assert.deepEqual(catalog.declared, []);
  const sample = catalog.seen.find((s) => s.type === "catalog.sample");
  assert.deepEqual([sample?.key, sample?.sample_payload, sample?.sample_omitted], ["acme/web", { a: 2 }, false]);
  const large = catalog.seen.find((s) => s.type === "catalog.large");
  assert.deepEqual([large?.sample_payload, large?.sample_omitted], [null, true], "a large payload is not copied into the catalog");
  const table = ok(await server.cli(["events", "catalog"])).stdout;
  assert.match(table, /PLATFORM TYPE[\s\S]*run\.failed[\s\S]*DECLARED BY GRAPHS[\s\S]*SEEN TYPE[\s\S]*catalog\.sample .*\{"a":2\}/);
});

void test("flow events ls filters by type, key and time", async () => {
  const a = await emit("filter.one", "--key", "k1");
  const b = await emit("filter.one", "--key", "k2");
  assert.deepEqual(
    (await json<EventView[]>(["events", "ls", "--type", "filter.one", "--key", "k2"])).map((e) => e.id),
    [b],
  );
  assert.deepEqual(
    (await json<EventView[]>(["events", "ls", "--type", "filter.one", "--since", "10m"])).map((e) => e.id),
    [b, a],
  );
  assert.deepEqual(
    await json<EventView[]>(["events", "ls", "--type", "filter.one", "--since", new Date(Date.now() + 60_000).toISOString()]),
    [],
  );
  const bad = await server.cli(["events", "ls", "--since", "yesterday"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--since/);
});

void test("a chain of handler emits stops at five generations: the sixth emit fails and nothing more is delivered", async () => {
  // Last in the file: a chain that does not stop would keep handler runs in flight for the tests after it.
  ok(
    await setHandler(
      "chain",
      `
if ! flow emit chain.step --payload '{"from":"handler"}' 2> ${dir}/chain-err-$CI_TRIGGER_EVENT_ID; then
  cat ${dir}/chain-err-$CI_TRIGGER_EVENT_ID >&2
  exit 3
fi
`,
      ["--on", "chain.step"],
    ),
  );
  // The outside emit starts generation 1; the run of generation 5 emits once more, which fails.
  const first = await emit("chain.step");
  let events: EventView[] = [];
  await waitFor("five chain.step events", async () => (events = await eventsOf("chain.step")).length >= 5);
  events.reverse();
  assert.equal(events[0]!.id, first);
  const runs = events.map((e) => handlerRun(e.id, "chain"));
  const ends = await Promise.all(runs.map(finished));
  assert.deepEqual(
    ends.map((r) => r.status),
    ["succeeded", "succeeded", "succeeded", "succeeded", "failed"],
  );
  for (let i = 1; i < events.length; i++)
    assert.equal(events[i]!.source_run_id, runs[i - 1], `event ${i} came from the run of generation ${i}`);
  assert.equal((await eventsOf("chain.step")).length, 5, "the sixth generation's emit recorded nothing");
  assert.match(await readFile(join(dir, `chain-err-${events[4]!.id}`), "utf8"), /chains stop at 5 generations/);
});
