/**
 * The durable primitives end to end (issue 3), through the real server, the real `flow` CLI, the
 * agent and the in-script client: step bodies run once across sleeps and agent kills, signals
 * queue, a timed-out wait stays pinned, locks are FIFO, fan-out, spawn and state.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { startTestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";
import type { TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { count, exists, runKit } from "./support/runs.js";

let server: TestServer;
let dir: string;

before(async () => {
  // No test here is about lease expiry (a killed agent's job is requeued by the launcher at once):
  // a lease that a loaded host's pauses cannot lapse, so no pass runs twice by accident.
  server = await startTestServer({ leaseMs: 5000, agents: 6 });
  dir = await scriptDir("flowsvc-durable-test-");
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const { start, follow, status, parked } = runKit(
  () => server,
  () => dir,
);

void test("each step body runs once across a sleep and an agent kill; plain shell runs once per pass", async () => {
  const run = await start(
    "sleep-kill.sh",
    `
echo "pass" >> ${dir}/sk-passes
flow step one -- sh -c 'echo ran >> ${dir}/sk-one; echo one'
flow sleep 1s
flow step two -- sh -c 'echo ran >> ${dir}/sk-two; echo two'
if [ ! -e ${dir}/sk-killed ]; then touch ${dir}/sk-killed; sleep 0.3; kill -9 "$FLOW_AGENT_PID"; sleep 60; fi
flow step three -- sh -c 'echo ran >> ${dir}/sk-three; echo three'
echo "end"
`,
  );
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  for (const step of ["one", "two", "three"])
    assert.equal(await readFile(join(dir, `sk-${step}`), "utf8"), "ran\n", `step ${step} ran once`);
  assert.equal(
    await readFile(join(dir, "sk-passes"), "utf8"),
    "pass\npass\npass\n",
    "one pass to the sleep, one to the kill, one to the end",
  );
  assert.equal(count(r.stdout, "one\n"), 1, "replayed step output is not re-emitted to the log");
  assert.equal(count(r.stdout, "end\n"), 1);
  assert.equal((await status(run)).status, "succeeded");
});

void test("signals sent before the wait queue up and each wait takes the next, in order; a parked wait wakes on its signal", async () => {
  const run = await start(
    "signals.sh",
    `
touch ${dir}/sig-started
while [ ! -e ${dir}/sig-go ]; do sleep 0.1; done
a=$(flow wait-signal go)
b=$(flow wait-signal go)
echo "a=$a b=$b"
c=$(flow wait-signal later --timeout 5m)
echo "c=$c"
`,
  );
  await waitFor("the script to start", exists(join(dir, "sig-started")));
  for (const payload of ['{"n":1}', '{"n":2}']) {
    const s = await server.cli(["signal", run, "go", "--payload", payload]);
    assert.equal(s.code, 0, s.stderr);
  }
  await writeFile(join(dir, "sig-go"), "");
  await waitFor("the run to park on `later`", parked(run));
  assert.equal((await status(run)).substate?.name, "later");
  const s = await server.cli(["signal", run, "later", "--payload", '"third"']);
  assert.equal(s.code, 0, s.stderr);
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /a=\{"n":1\} b=\{"n":2\}\n/);
  assert.match(r.stdout, /c="third"\n/);
});

void test("a wait that timed out exits 124, and a signal that arrives later does not change the branch taken", async () => {
  const run = await start(
    "timeout.sh",
    `
if v=$(flow wait-signal approve --timeout 1s); then echo "branch=approved v=$v"; else echo "branch=timeout code=$?"; fi
touch ${dir}/to-branched
flow wait-signal go
echo "end"
`,
  );
  await waitFor("the wait to time out", exists(join(dir, "to-branched")));
  // The late signal is sent while the run still waits for "go": the run cannot end first on a slow host.
  const s = await server.cli(["signal", run, "approve", "--payload", "true"]);
  assert.equal(s.code, 0, s.stderr);
  const go = await server.cli(["signal", run, "go"]);
  assert.equal(go.code, 0, go.stderr);
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(
    count(r.stdout, "branch=timeout code=124\n"),
    2,
    "the pass after the timeout and the pass after the second wait both take the timeout branch",
  );
  assert.ok(!r.stdout.includes("branch=approved"), r.stdout);
  assert.match(r.stdout + r.stderr, /wait-signal approve timed out/);
});

void test("runs contending for one lock are granted it in FIFO order; a waiting run is parked awaiting_lease", async () => {
  const order = join(dir, "lock-order");
  const holder = await start(
    "lock-a.sh",
    `
flow lock lk-res
echo A >> ${order}
while [ ! -e ${dir}/lock-release ]; do sleep 0.1; done
`,
  );
  await waitFor("A to hold the lock", exists(order));
  const contender = (name: string): string => `
flow lock lk-res
echo ${name} >> ${order}
`;
  const b = await start("lock-b.sh", contender("B"));
  await waitFor("B to wait for the lease", parked(b));
  assert.equal((await status(b)).substate?.name, "awaiting_lease");
  const c = await start("lock-c.sh", contender("C"));
  await waitFor("C to wait for the lease", parked(c));
  await writeFile(join(dir, "lock-release"), "");
  for (const run of [holder, b, c]) assert.equal((await follow(run)).code, 0);
  assert.equal(await readFile(order, "utf8"), "A\nB\nC\n");
});

void test("fan-out: activity returns the child's stdout, collect its exit code; a failed uncollected child leaves the run succeeded", async () => {
  const run = await start(
    "fanout.sh",
    `
s=$(flow activity sync -- sh -c 'echo sync-out; echo from-child-stderr >&2')
echo "sync=$s"
flow activity-submit bad -- sh -c 'exit 3'
flow activity-submit worse -- sh -c 'exit 4'
flow activity-collect worse || echo "worse exited $?"
n=$(flow activity-wait-all)
echo "failed-uncollected=$n"
`,
  );
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  // Plain shell runs once per pass: `sync=` is printed on each pass after the activity ended.
  const syncs = [...r.stdout.matchAll(/^sync=(.*)$/gm)].map((m) => m[1]);
  assert.ok(syncs.length >= 1 && syncs.every((v) => v === "sync-out"), r.stdout);
  assert.match(r.stdout, /worse exited 4\n/);
  assert.match(r.stdout, /failed-uncollected=1\n/);
  assert.match(r.stdout + r.stderr, /from-child-stderr/);
  assert.equal((await status(run)).status, "succeeded");
});

void test("spawn prints the child's run id, and a replay prints the same id without a second child", async () => {
  await writeFile(join(dir, "child.sh"), "echo child-ran\n");
  const run = await start(
    "spawn.sh",
    `
child=$(flow spawn ${dir}/child.sh --tag kid)
echo "child=$child"
flow sleep 0s
echo "after child=$child"
`,
  );
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const ids = [...r.stdout.matchAll(/child=(run-[0-9a-z]{26})\n/g)].map((m) => m[1]);
  assert.equal(ids.length, 3, r.stdout);
  assert.equal(new Set(ids).size, 1, "one child, the same id on every pass");
  const child = ids[0]!;
  const kid = await follow(child);
  assert.equal(kid.code, 0, kid.stdout + kid.stderr);
  assert.match(kid.stdout, /child-ran/);
  assert.equal((await status(child)).parent_run_id, run);
});

void test("state: set takes JSON or a bare string; get prints it (nothing when unset); list prints key<TAB>value lines", async () => {
  const run = await start(
    "state.sh",
    `
flow state set greeting hello
flow state set conf '{"a":1}'
flow state set shared 7 --entity team
echo "g=$(flow state get greeting) c=$(flow state get conf) m=[$(flow state get missing)] t=$(flow state get shared --entity team)"
flow state list
flow state delete greeting
echo "after=[$(flow state get greeting)]"
`,
  );
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /g=hello c=\{"a":1\} m=\[\] t=7\n/);
  assert.match(r.stdout, /greeting\thello\n/);
  assert.match(r.stdout, /conf\t\{"a":1\}\n/);
  assert.ok(!r.stdout.includes("shared\t"), "an entity's keys are not the run's");
  assert.match(r.stdout, /after=\[\]\n/);
});
