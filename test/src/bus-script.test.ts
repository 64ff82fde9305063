/**
 * The event bus inside scripts end to end (issue 4, items 1 and 4), through the real server, the
 * real `flow` CLI, the agent and the in-script client: `flow emit` is checkpointed by position (a
 * replay prints the same id and records nothing new), `flow wait-event` waits for the next event
 * of its type after the wait began, prints the whole envelope and exits 124 on timeout; every
 * waiter receives an event; a subject narrows delivery of keyed events to a handler run's waits.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { derivedId } from "@flowsvc/core";
import { startTestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";
import type { TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { exists, ok, runKit } from "./support/runs.js";

let server: TestServer;
let dir: string;

before(async () => {
  // Handler runs need the `polyglot` capability (the subject test).
  // No test here is about lease expiry (a killed agent's job is requeued by the launcher at once):
  // a lease that a loaded host's pauses cannot lapse, so no pass runs twice by accident.
  server = await startTestServer({ leaseMs: 5000, agents: 4, env: { FLOWSVC_AGENT_POOLS: "polyglot:1" } });
  dir = await scriptDir("flowsvc-bus-script-test-");
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const EVENT_ID = /^evt-[0-9a-z]{26}$/;

interface EventView {
  id: string;
  type: string;
  key: string | null;
  payload: unknown;
  source_run_id?: string | null;
}
interface Envelope {
  type: string;
  event: string;
  key?: string;
  payload: unknown;
}
interface StepView {
  position: number;
  kind: string;
  name: string;
  status: string;
}

const { json, start, follow, status, parked } = runKit(
  () => server,
  () => dir,
);

/** `flow emit` from outside any script (the user CLI, over HTTP); answers the id. */
const emit = async (type: string, ...args: string[]): Promise<string> => {
  const id = ok(await server.cli(["emit", type, ...args])).stdout.trim();
  assert.match(id, EVENT_ID);
  return id;
};

/** The run is parked on an event wait: `flow status` shows substate `event:...` (spec, Script semantics 5). */
const parkedOnEvent = (run: string): (() => Promise<boolean>) => parked(run, (name) => name.startsWith("event:"));

/** The JSON a script printed after `<label>=` on a line of its log. */
const printed = <T>(log: string, label: string): T[] =>
  log
    .split("\n")
    .filter((l) => l.startsWith(`${label}=`))
    .map((l) => JSON.parse(l.slice(label.length + 1)) as T);

void test("an in-script emit prints an id flow events show finds; a replay after a sleep prints the same id and records one event", async () => {
  const run = await start(
    "emit-replay.sh",
    `
payload="{\\"pass\\":\\"$(date +%s%N)\\"}"
echo "$payload" >> ${dir}/em-payloads
id=$(flow emit script.emitted --key acme/web --payload "$payload")
echo "$id" >> ${dir}/em-ids
flow emit script.direct
flow sleep 1s
echo "end id=$id"
`,
  );
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const ids = (await readFile(join(dir, "em-ids"), "utf8")).trim().split("\n");
  assert.equal(ids.length, 2, "one pass to the sleep, one after it");
  assert.equal(ids[0], ids[1], "the replayed emit printed the same id");
  const id = ids[0]!;
  assert.match(id, EVENT_ID);
  assert.match(r.stdout, new RegExp(`end id=${id}\n`));

  const shown = await json<EventView>(["events", "show", id]);
  const [firstPayload, secondPayload] = (await readFile(join(dir, "em-payloads"), "utf8")).trim().split("\n");
  assert.notEqual(firstPayload, secondPayload, "each pass asked with its own payload");
  assert.deepEqual(
    [shown.id, shown.type, shown.key, shown.payload],
    [id, "script.emitted", "acme/web", JSON.parse(firstPayload!)],
    "the first attempt's payload stands",
  );
  const all = await json<EventView[]>(["events", "ls", "--type", "script.emitted", "--limit", "100"]);
  assert.deepEqual(
    all.map((e) => e.id),
    [id],
    "the replay recorded no second event",
  );

  const direct = await json<EventView[]>(["events", "ls", "--type", "script.direct", "--limit", "100"]);
  assert.equal(direct.length, 1);
  assert.equal(r.stdout.split("\n").filter((l) => l === direct[0]!.id).length, 1, "a replayed emit on the log's pipe prints nothing again");
});

void test("a waiter that started after an event fired waits for the next one and prints its whole envelope", async () => {
  const earlier = await emit("deploy.done", "--payload", '{"v":1}');
  const run = await start(
    "wait-next.sh",
    `
envelope=$(flow wait-event deploy.done --timeout 20s)
echo "got=$envelope"
`,
  );
  await waitFor("the run to park on its event wait", parkedOnEvent(run));
  const next = await emit("deploy.done", "--payload", '{"v":2}');
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const [envelope, ...more] = printed<Envelope>(r.stdout, "got");
  assert.equal(more.length, 0, r.stdout);
  assert.deepEqual(envelope, { type: "deploy.done", event: next, payload: { v: 2 } });
  assert.notEqual(envelope?.event, earlier);
});

void test("a wait-event that times out exits 124 and stays timed out: a later event does not change the branch taken", async () => {
  const run = await start(
    "wait-timeout.sh",
    `
if e=$(flow wait-event never.happens --timeout 1s); then echo "branch=event $e"; else echo "branch=timeout code=$?"; fi
touch ${dir}/wt-branched
flow wait-signal go
echo end
`,
  );
  await waitFor("the wait to time out", exists(join(dir, "wt-branched")));
  // The late event is emitted while the run still waits for "go": the run cannot end first on a slow host.
  await emit("never.happens");
  ok(await server.cli(["signal", run, "go"]));
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(r.stdout.split("branch=timeout code=124\n").length - 1, 2, `both passes took the timeout branch:\n${r.stdout}`);
  assert.doesNotMatch(r.stdout, /branch=event/);
  assert.match(r.stdout + r.stderr, /flow: wait-event never\.happens timed out/);
  assert.equal((await status(run)).status, "succeeded");
});

void test("two waiters in two runs both receive one event, emitted by a third script", async () => {
  const waiter = `e=$(flow wait-event fanout.both --timeout 60s)\necho "got=$e"\n`;
  const runs = [await start("waiter-a.sh", waiter), await start("waiter-b.sh", waiter)];
  for (const run of runs) await waitFor(`${run} to park`, parkedOnEvent(run));
  const emitter = await start("emitter.sh", `flow emit fanout.both --payload '{"to":"all"}'\n`);
  const e = await follow(emitter);
  assert.equal(e.code, 0, e.stdout + e.stderr);
  const id = /evt-[0-9a-z]{26}/.exec(e.stdout)?.[0];
  assert.ok(id, e.stdout);
  for (const run of runs) {
    const r = await follow(run);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(printed<Envelope>(r.stdout, "got"), [{ type: "fanout.both", event: id, payload: { to: "all" } }], run);
  }
  const shown = await json<EventView>(["events", "show", id]);
  assert.equal(shown.source_run_id, emitter, "the event names the run that emitted it");
});

/** docs/internals.md, Identifiers: a handler run's id derives from (event id, handler name). */
const handlerRun = (eventId: string, handler: string): string =>
  derivedId("run", createHash("sha256").update(`${eventId}\u0000${handler}`).digest());

void test("a subject narrows keyed events: a run started by a keyed event waits only for its key or unkeyed events", async () => {
  const path = join(dir, "watch.sh");
  await writeFile(
    path,
    `
a=$(flow wait-event deploy.finished --timeout 60s)
echo "a=$a"
b=$(flow wait-event deploy.finished --timeout 60s)
echo "b=$b"
`,
  );
  ok(await server.cli(["handler", "set", "deploy-watch", path, "--on", "watch.start"]));
  try {
    const started = await emit("watch.start", "--key", "acme/web");
    const run = handlerRun(started, "deploy-watch");
    await waitFor("the handler run to park on its first wait", parkedOnEvent(run), 60_000);
    await emit("deploy.finished", "--key", "other/repo", "--payload", '{"n":1}');
    const steps = await json<StepView[]>(["steps", run]);
    assert.deepEqual(
      steps.map((s) => [s.position, s.kind, s.status]),
      [[0, "wait-event", "pending"]],
      "another subject's event does not reach the wait",
    );
    const mine = await emit("deploy.finished", "--key", "acme/web", "--payload", '{"n":2}');
    await waitFor(
      "the second wait",
      async () => (await parkedOnEvent(run)()) && (await json<StepView[]>(["steps", run])).length === 2,
      60_000,
    );
    const unkeyed = await emit("deploy.finished", "--payload", '{"n":3}');
    const r = await follow(run);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    // Plain shell runs once per pass: the first wait's line is printed again by the pass after the second park.
    const a = printed<Envelope>(r.stdout, "a");
    assert.deepEqual([a.length, a[0]], [2, { type: "deploy.finished", event: mine, key: "acme/web", payload: { n: 2 } }]);
    assert.deepEqual(a[1], a[0], "the replayed wait printed the same envelope");
    assert.deepEqual(printed<Envelope>(r.stdout, "b"), [{ type: "deploy.finished", event: unkeyed, payload: { n: 3 } }]);
  } finally {
    ok(await server.cli(["handler", "rm", "deploy-watch"]));
  }
});
