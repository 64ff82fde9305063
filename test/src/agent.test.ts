/**
 * The agent end to end, through the real server, the real `flow` CLI and the in-script client:
 * replay after agent death, SIGTERM, determinism errors, the sealed environment and masking, the
 * step output limit.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { startTestServer } from "./support/server.js";
import { alive, waitFor } from "./support/wait.js";
import type { TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { count, ended, exists, runKit, storedLog } from "./support/runs.js";

let server: TestServer;
let dir: string;

before(async () => {
  server = await startTestServer({ leaseMs: 2000 });
  dir = await scriptDir("flowsvc-agent-test-");
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const { submit, start, follow, json } = runKit(
  () => server,
  () => dir,
);

void test("after the agent is killed, recorded steps replay: each command runs once and its output is logged once", async () => {
  const killed = join(dir, "killed");
  const run = await start(
    "replay.sh",
    `
echo "pass"
v=$(flow step one -- sh -c 'echo ran >> ${dir}/ran-one; echo "one-$$"')
echo "v=$v"
flow step shown -- echo shown-once
if [ ! -e ${killed} ]; then echo "$FLOW_AGENT_PID" > ${killed}; sleep 60; fi
flow step two -- echo two
echo "end v=$v"
`,
  );
  // The agent is killed once its first pass's output is in the stored log (not after a fixed pause).
  await waitFor(
    "the first pass to wait",
    () =>
      readFile(killed, "utf8").then(
        (t) => t.endsWith("\n"),
        () => false,
      ),
    60_000,
  );
  await waitFor("the first pass's output to be stored", async () => (await storedLog(server, run)).includes("shown-once\n"), 60_000);
  process.kill(Number((await readFile(killed, "utf8")).trim()), "SIGKILL");
  const r = await follow(run);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(await readFile(join(dir, "ran-one"), "utf8"), "ran\n", "step one's command ran once");
  assert.equal(count(r.stdout, "pass\n"), 2, "plain shell appears once per pass");
  assert.equal(count(r.stdout, "shown-once\n"), 1, "replayed output is not re-emitted to the live log");
  const values = [...r.stdout.matchAll(/^v=(one-\d+)$/gm)].map((m) => m[1]);
  assert.equal(values.length, 2);
  assert.equal(values[0], values[1], "the replayed step returned the recorded stdout");
  assert.match(r.stdout, new RegExp(`end v=${values[0]}\\n`));
  const steps = await json<Array<{ position: number; name: string; ordinal: number; status: string }>>(["steps", run]);
  assert.deepEqual(
    steps.map((s) => [s.position, s.name, s.ordinal, s.status]),
    [
      [0, "one", 0, "done"],
      [1, "shown", 0, "done"],
      [2, "two", 0, "done"],
    ],
  );
});

void test("an agent stopped with SIGTERM does not finish the job; it is dispatched again and completes", async () => {
  const { r } = await submit(
    "sigterm.sh",
    `
flow step first -- sh -c 'echo ran >> ${dir}/ran-first; echo first'
if [ ! -e ${dir}/termed ]; then touch ${dir}/termed; kill -TERM "$FLOW_AGENT_PID"; sleep 60; fi
echo finished
`,
  );
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(await readFile(join(dir, "ran-first"), "utf8"), "ran\n");
  assert.equal(count(r.stdout, "finished\n"), 1);
});

void test("a replay that reaches a different step fails the run with a determinism error naming both calls", async () => {
  const { run, r } = await submit(
    "drift.sh",
    `
if [ ! -e ${dir}/drifted ]; then
  touch ${dir}/drifted
  flow step build -- echo built
  sleep 0.5; kill -9 "$FLOW_AGENT_PID"; sleep 60
fi
flow step test -- echo tested || echo "step exited $?"
echo "not reached"
sleep 60
`,
  );
  assert.equal(r.code, 1, r.stdout + r.stderr);
  const message = 'determinism error at call #0: the journal recorded step "build"#0 but the script called step "test"#0';
  assert.ok(r.stdout.includes(message) || r.stderr.includes(message), r.stdout + r.stderr);
  const status = await json<{ status: string; error?: string }>(["status", run]);
  assert.equal(status.status, "failed");
  assert.equal(status.error, message);
});

void test("the script gets its secrets masked in the log, the service variables, and nothing else of the agent's env", async () => {
  const set = await server.cli(["secret", "set", "AGENT_TEST_SECRET", "s3cr3t-v4lue-for-agent"]);
  assert.equal(set.code, 0, set.stderr);
  const { run, r } = await submit(
    "env.sh",
    `
echo "secret=$AGENT_TEST_SECRET"
echo "token=\${FLOW_JOB_TOKEN:-unset} server=\${FLOW_SERVER_URL:-unset}"
echo "trigger=$CI_TRIGGER_EVENT input=$(cat "$FLOW_INPUT_FILE")"
test -S "$FLOW_AGENT_SOCKET" && test -n "$FLOW_AGENT_ID" && test -n "$FLOW_WORKFLOW_ID" && test -n "$FLOW_ACTIVITY_ID" && echo "service vars set"
flow output set answer=42
`,
  );
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.ok(!r.stdout.includes("s3cr3t-v4lue-for-agent"));
  assert.match(r.stdout, /secret=\*\*\*\n/);
  assert.match(r.stdout, /token=unset server=unset\n/);
  assert.match(r.stdout, /trigger=manual input=\{"type":"manual"/);
  assert.match(r.stdout, /service vars set\n/);
  const status = await json<{ output?: Record<string, unknown> }>(["status", run]);
  assert.equal(status.output?.["answer"], "42");
});

void test("a step whose output is over 2 MiB is recorded as failed with how far over", async () => {
  const { run, r } = await submit(
    "big.sh",
    `
flow step big -- sh -c 'yes | head -c 2100000' > /dev/null
`,
  );
  assert.equal(r.code, 1);
  assert.match(r.stdout + r.stderr, /step output is 2100000 bytes, 2848 bytes over the 2 MiB limit/);
  const steps = await json<Array<{ name: string; status: string; exit_code: number; error?: string }>>(["steps", run]);
  assert.deepEqual(
    steps.map((s) => [s.name, s.status, s.exit_code, s.error]),
    [["big", "done", 1, "step output is 2100000 bytes, 2848 bytes over the 2 MiB limit"]],
  );
});

void test("after server death the script keeps running; its output and pending calls land when the server is back", async () => {
  const own = await startTestServer({ leaseMs: 60_000 });
  try {
    const file = join(dir, "outage.sh");
    await writeFile(
      file,
      `
flow step before -- echo before
touch ${dir}/outage-ready
while [ ! -e ${dir}/outage-go ]; do sleep 0.1; done
echo "printed while the server was down"
touch ${dir}/outage-calling
flow step during -- echo during
echo "after"
`,
    );
    const submitted = await own.cli(["submit", file]);
    assert.equal(submitted.code, 0, submitted.stderr);
    const run = submitted.stdout.trim();
    await waitFor("the script to start", exists(join(dir, "outage-ready")));
    await own.kill("SIGKILL");
    await writeFile(join(dir, "outage-go"), "");
    // The log and then the step call are sent (and retried) while the server is down.
    await waitFor("the script to reach its step call", exists(join(dir, "outage-calling")));
    await own.restart();
    assert.equal(await ended(own, run), "succeeded");
    const log = await own.cli(["follow", run]);
    assert.match(log.stdout, /before\nprinted while the server was down\nduring\nafter\n/);
    const steps = await own.cli(["steps", run, "-o", "json"]);
    assert.deepEqual(
      (JSON.parse(steps.stdout) as Array<{ name: string }>).map((s) => s.name),
      ["before", "during"],
    );
  } finally {
    await own.stop();
  }
});

void test("an agent whose lease was taken over ends its script and does not finish; the new attempt completes the run", async () => {
  const file = join(dir, "lost.sh");
  await writeFile(
    file,
    `
flow step before -- sh -c 'echo ran >> ${dir}/lost-ran; echo before'
echo "$$ $FLOW_AGENT_PID" >> ${dir}/lost-passes
while [ ! -e ${dir}/lost-go ]; do sleep 0.1; done
echo "$$" >> ${dir}/lost-ends
`,
  );
  const submitted = await server.cli(["submit", file]);
  assert.equal(submitted.code, 0, submitted.stderr);
  const run = submitted.stdout.trim();
  const passes = async () =>
    (await readFile(join(dir, "lost-passes"), "utf8").catch(() => ""))
      .split("\n")
      .filter(Boolean)
      .map((l) => l.split(" ").map(Number));
  await waitFor("the first pass", async () => (await passes()).length === 1);
  const [scriptPid = 0, agentPid = 0] = (await passes())[0]!;
  // A frozen agent stops renewing its lease: the job is dispatched again while its script still runs.
  process.kill(agentPid, "SIGSTOP");
  try {
    await waitFor("the second pass", async () => (await passes()).length === 2, 60_000);
    assert.ok(alive(scriptPid), "the first pass is still running");
  } finally {
    process.kill(agentPid, "SIGCONT");
  }
  // Thawed, its next call is refused (409 job_lost): it ends its script and its job without finishing
  // (a local agent process then waits for its next job: agent-reuse.test.ts).
  await waitFor("the first agent to end its script", () => Promise.resolve(!alive(scriptPid)));
  await waitFor("the first agent to end its job as lost", async () =>
    (await readFile(join(server.dataDir, "server.log"), "utf8"))
      .split("\n")
      .some((l) => l.includes('"msg":"job done"') && l.includes(`"pid":${agentPid},`) && l.includes('"outcome":"lost"')),
  );
  await writeFile(join(dir, "lost-go"), "");
  assert.equal(await ended(server, run), "succeeded");
  assert.equal(await readFile(join(dir, "lost-ran"), "utf8"), "ran\n", "the recorded step did not run again");
  const ends = (await readFile(join(dir, "lost-ends"), "utf8")).split("\n").filter(Boolean).map(Number);
  assert.deepEqual(ends, [(await passes())[1]![0]], "only the new attempt's pass reached the end");
});
