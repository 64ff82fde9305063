/**
 * Issue 3's recovery policies end to end: an uncollected failed child annotates a succeeded run,
 * `flow rerun --from` keeps the recorded prefix (and fails with the determinism error when it no
 * longer reproduces), `flow submit --retry` re-runs the whole script from a clean journal, and an
 * activity that requires a capability runs on an agent pool that has it.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { startTestServer, type TestServer } from "./support/server.js";
import { alive, waitFor } from "./support/wait.js";
import { scriptDir } from "./support/script-dir.js";
import { RUN_ID, runKit } from "./support/runs.js";

let server: TestServer;
let dir: string;

before(async () => {
  server = await startTestServer({ agents: 3, env: { FLOWSVC_AGENT_POOLS: "polyglot:1" } });
  dir = await scriptDir("flowsvc-policy-test-");
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

interface RunJson {
  id: string;
  status: string;
  error: string | null;
  attempt: number;
  rerun_of: string | null;
  annotations: Array<{ markdown: string }>;
  activities: Array<{ name: string; status: string; exit_code: number | null }>;
}

const {
  script,
  start,
  follow,
  status: statusOf,
  parked: isParked,
} = runKit(
  () => server,
  () => dir,
);
const status = (run: string): Promise<RunJson> => statusOf<RunJson>(run);

const counter = async (name: string): Promise<number> => (await readFile(join(dir, name), "utf8").catch(() => "")).length;

void test("a failed activity nobody collected leaves the run succeeded, annotated, and listed in status", async () => {
  // The script ends once the test has seen the activity fail (a condition, not a sleep).
  const go = join(dir, "uncollected-go");
  const id = await start(
    "uncollected.sh",
    `flow activity-submit doomed -- sh -c 'exit 5'\nwhile [ ! -e ${go} ]; do sleep 0.1; done\necho done\n`,
  );
  await waitFor("the activity to fail", async () => (await status(id)).activities.some((a) => a.status === "failed"), 60_000);
  await writeFile(go, "");
  const r = await follow(id);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const run = await status(id);
  assert.equal(run.status, "succeeded");
  assert.deepEqual(run.activities, [{ name: "doomed", status: "failed", exit_code: 5 }]);
  assert.match(run.annotations.map((a) => a.markdown).join("\n"), /1 activity was never collected: `doomed` \(failed, exit 5\)/);
  const table = await server.cli(["status", run.id]);
  assert.match(table.stdout, /activities:\s+doomed\s+failed\s+exit 5/);
});

void test("rerun --from keeps the recorded steps before the site and runs the rest again", async () => {
  const file = await script(
    "rerun.sh",
    [
      `d=${dir}`,
      'flow step a -- sh -c "printf x >> $d/a.count; echo A"',
      'flow step b -- sh -c "printf x >> $d/b.count; echo B"',
      'flow step c -- sh -c "printf x >> $d/c.count; echo C"',
    ].join("\n") + "\n",
  );
  const first = await server.cli(["submit", file, "--follow"]);
  assert.equal(first.code, 0, first.stderr);
  const original = RUN_ID.exec(first.stderr)![0];
  const again = await server.cli(["rerun", original, "--from", "b", "--follow"]);
  assert.equal(again.code, 0, again.stderr);
  const rerun = await status(RUN_ID.exec(again.stderr)![0]);
  assert.equal(rerun.rerun_of, original);
  assert.equal(await counter("a.count"), 1, "step a was kept, not run again");
  assert.equal(await counter("b.count"), 2);
  assert.equal(await counter("c.count"), 2);

  const missing = await server.cli(["rerun", original, "--from", "nope#3"]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /has no recorded step nope#3/);
});

void test("rerun --from fails with the determinism error when the kept prefix no longer reproduces", async () => {
  const nameFile = join(dir, "first-step-name");
  await writeFile(nameFile, "fetch");
  const file = await script("drift.sh", `flow step "$(cat ${nameFile})" -- echo one\nflow step build -- echo two\n`);
  const first = await server.cli(["submit", file, "--follow"]);
  assert.equal(first.code, 0, first.stderr);
  await writeFile(nameFile, "download");
  const again = await server.cli(["rerun", RUN_ID.exec(first.stderr)![0], "--from", "build", "--follow"]);
  assert.equal(again.code, 1);
  const run = await status(RUN_ID.exec(again.stderr)![0]);
  assert.equal(run.status, "failed");
  assert.match(
    run.error ?? "",
    /determinism error at call #0: the journal recorded step "fetch"#0 but the script called step "download"#0/,
  );
});

void test("submit --retry re-runs the whole script from a clean journal until an attempt succeeds", async () => {
  const file = await script(
    "flaky.sh",
    [
      `d=${dir}`,
      'flow step work -- sh -c "printf x >> $d/work.count"',
      "n=$(cat $d/work.count | wc -c)",
      'echo "attempt sees $n"',
      '[ "$n" -ge 2 ]',
    ].join("\n") + "\n",
  );
  const r = await server.cli(["submit", file, "--retry", "3,200ms", "--follow"], { timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const run = await status(RUN_ID.exec(r.stderr)![0]);
  assert.equal(run.status, "succeeded");
  assert.equal(run.attempt, 2);
  assert.equal(await counter("work.count"), 2, "the recorded step was purged, so its body ran again on attempt 2");
  assert.match(r.stdout, /attempt 1 of 3 failed/);

  const bad = await server.cli(["submit", file, "--retry", "0"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--retry/);
});

void test("an activity that requires a capability runs on the agent pool that advertises it", async () => {
  const file = await script("caps.sh", "out=$(flow activity on-poly --requires polyglot -- sh -c 'echo ran-in $PWD')\necho \"$out\"\n");
  const r = await server.cli(["submit", file, "--follow"], { timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /ran-in \S+\/agents\/agt-/);
});

void test("cancel stops a parked run and a running one; run.cancelled carries the reason and a cancelled run takes no signals", async () => {
  const parkedFile = await script("parked.sh", "flow wait-signal never\n");
  const parked = (await server.cli(["submit", parkedFile])).stdout.trim();
  await waitFor("the run to park on its signal wait", isParked(parked), 60_000);
  const c = await server.cli(["cancel", parked, "--reason", "superseded"]);
  assert.equal(c.code, 0, c.stderr);
  assert.match(c.stdout, /cancelled/);
  assert.equal((await status(parked)).status, "cancelled");
  const sig = await server.cli(["signal", parked, "never"]);
  assert.equal(sig.code, 1);
  assert.match(sig.stderr, /has cancelled; it takes no more signals/);

  const marker = join(dir, "still-running");
  const stepPid = join(dir, "step-pid");
  const runningFile = await script("running.sh", `flow step long -- sh -c 'echo $$ > ${stepPid}; sleep 30; touch ${marker}'\n`);
  const running = (await server.cli(["submit", runningFile])).stdout.trim();
  await waitFor("the step's process to start", () =>
    readFile(stepPid, "utf8").then(
      (t) => t.trim() !== "",
      () => false,
    ),
  );
  const pid = Number((await readFile(stepPid, "utf8")).trim());
  assert.equal((await server.cli(["cancel", running])).code, 0);
  const again = await server.cli(["cancel", running]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /has already ended: it is cancelled/);
  const events = JSON.parse((await server.cli(["events", "ls", "--type", "run.cancelled", "-o", "json"])).stdout) as Array<{
    payload: { run_id: string; reason: string };
  }>;
  assert.equal(events.find((e) => e.payload.run_id === parked)?.payload.reason, "superseded");
  assert.match(events.find((e) => e.payload.run_id === running)?.payload.reason ?? "", /cancelled by admin/);
  // The agent learns at its next heartbeat (lease/3) and ends the script's process group, long
  // before the step's 30 s sleep would have finished.
  await waitFor("the cancelled step's process to end", () => !alive(pid), 20_000);
  assert.equal(
    await readFile(marker).then(
      () => true,
      () => false,
    ),
    false,
    "the cancelled script was ended before its step finished",
  );
});
