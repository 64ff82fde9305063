/**
 * Local agents are reused (controller/src/local-launcher.ts, agent-image/src/worker.ts): one agent
 * process serves run after run and replay pass after replay pass, each job with only its own env
 * and masks; a worker killed mid-job has its job dispatched again and its script ended; stopping
 * or killing the server leaves no agent behind. Through the real server, Postgres, `flow` and agents.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startTestServer } from "./support/server.js";
import { alive, waitFor } from "./support/wait.js";
import type { TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { runKit, storedLog, type RunKit } from "./support/runs.js";

let server: TestServer;
let dir: string;

before(async () => {
  // One agent: a run can only go to the process that ran the previous one, or to a new process.
  // No test here is about lease expiry (a killed agent's job is requeued by the launcher at once):
  // a lease that a loaded host's pauses cannot lapse, so no pass runs twice by accident.
  server = await startTestServer({ leaseMs: 5000, agents: 1 });
  dir = await scriptDir("flowsvc-reuse-test-");
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const { submit } = runKit(
  () => server,
  () => dir,
);
/** The same helpers on a test's own server. */
const on = (own: TestServer): RunKit =>
  runKit(
    () => own,
    () => dir,
  );

/** The `key=value` pairs a script printed on lines starting with `tag`. */
const fields = (stdout: string, tag: string): Array<Record<string, string>> =>
  stdout
    .split("\n")
    .filter((l) => l.startsWith(`${tag} `))
    .map((l) =>
      Object.fromEntries(
        l
          .slice(tag.length + 1)
          .split(" ")
          .map((kv) => kv.split("=") as [string, string]),
      ),
    );

/** The server's log lines with this message. */
const serverLog = (msg: string, on: TestServer = server): Array<Record<string, unknown>> =>
  readFileSync(join(on.dataDir, "server.log"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l["msg"] === msg);

void test("successive runs are served by one agent process, each under its own agent id, and each succeeds", async () => {
  const started = serverLog("agent started").length;
  const seen: Array<Record<string, string>> = [];
  for (let i = 0; i < 4; i++) {
    const { r } = await submit(`reuse-${i}.sh`, 'echo "seen pid=$FLOW_AGENT_PID id=$FLOW_AGENT_ID"\n');
    assert.equal(r.code, 0, r.stdout + r.stderr);
    seen.push(...fields(r.stdout, "seen"));
  }
  assert.equal(seen.length, 4);
  assert.equal(new Set(seen.map((s) => s["pid"])).size, 1, `one agent process: ${JSON.stringify(seen)}`);
  assert.equal(new Set(seen.map((s) => s["id"])).size, 4, "each dispatch has its own FLOW_AGENT_ID");
  assert.equal(serverLog("agent started").length, started, "no agent process was started for these runs");
  const assigned = serverLog("job assigned").slice(-4);
  assert.deepEqual(
    assigned.map((l) => String(l["pid"])),
    seen.map((s) => s["pid"]),
  );
  // At the default log level the agents' own info lines, which repeat the server's, stay out of its log.
  const forwarded = serverLog("agent says").map((l) => String(l["agent"]));
  assert.deepEqual(
    forwarded.filter((l) => l.includes('"level":"info"')),
    [],
    forwarded.join("\n"),
  );
});

void test("a run sees only its own secrets, masks and --env: none of them survive into the next run on the same agent", async () => {
  const value = "reuse-s3cr3t-v4lue";
  const set = await server.cli(["secret", "set", "REUSE_SECRET", value]);
  assert.equal(set.code, 0, set.stderr);
  const source = `echo "vars pid=$FLOW_AGENT_PID secret=\${REUSE_SECRET:-unset} only=\${RUN_ONE_ONLY:-unset}"\necho "literal ${value}"\n`;
  const one = await submit("secrets-1.sh", source, ["--env", "RUN_ONE_ONLY=from-run-one"]);
  assert.equal(one.r.code, 0, one.r.stdout + one.r.stderr);
  assert.ok(!one.r.stdout.includes(value), one.r.stdout);
  assert.match(one.r.stdout, /secret=\*\*\* only=from-run-one\nliteral \*\*\*\n/);

  const removed = await server.cli(["secret", "rm", "REUSE_SECRET"]);
  assert.equal(removed.code, 0, removed.stderr);
  const two = await submit("secrets-2.sh", source);
  assert.equal(two.r.code, 0, two.r.stdout + two.r.stderr);
  assert.equal(fields(two.r.stdout, "vars")[0]?.["pid"], fields(one.r.stdout, "vars")[0]?.["pid"], "the same agent ran both");
  assert.match(two.r.stdout, /secret=unset only=unset\n/, "run one's secret and --env are gone");
  assert.match(two.r.stdout, new RegExp(`literal ${value}\\n`), "run one's mask does not apply to run two, which has no such secret");
});

void test("a durable script with several sleeps completes, every replay pass on the same agent process", async () => {
  const { r } = await submit(
    "sleeps.sh",
    `
echo "pass pid=$FLOW_AGENT_PID"
flow step one -- sh -c 'echo ran >> ${dir}/sleeps-one; echo one'
flow sleep 0s
flow step two -- echo two
flow sleep 0s
flow sleep 100ms
flow step three -- echo three
echo "end"
`,
  );
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const passes = fields(r.stdout, "pass");
  assert.equal(passes.length, 4, r.stdout);
  assert.equal(new Set(passes.map((p) => p["pid"])).size, 1, `one agent for every pass: ${JSON.stringify(passes)}`);
  assert.equal(await readFile(join(dir, "sleeps-one"), "utf8"), "ran\n");
  assert.match(r.stdout, /end\n$/);
});

void test("an agent killed with SIGKILL mid-job: its script is ended, the job is dispatched again to a new agent and the run completes", async () => {
  const file = join(dir, "killed.sh");
  await writeFile(
    file,
    `
flow step before -- sh -c 'echo ran >> ${dir}/killed-ran; echo before'
echo "pass pid=$FLOW_AGENT_PID"
if [ ! -e ${dir}/killed-once ]; then
  touch ${dir}/killed-once
  sleep 30 &
  echo "$! $FLOW_AGENT_PID" > ${dir}/killed-pids
  wait
fi
echo "end"
`,
  );
  const submitted = await server.cli(["submit", file]);
  assert.equal(submitted.code, 0, submitted.stderr);
  const run = submitted.stdout.trim();
  const pidsFile = join(dir, "killed-pids");
  await waitFor("the first pass to start its sleep", () =>
    readFile(pidsFile, "utf8").then(
      (t) => t.endsWith("\n"),
      () => false,
    ),
  );
  const [sleepPid = 0, agentPid = 0] = (await readFile(pidsFile, "utf8")).trim().split(" ").map(Number);
  assert.ok(alive(sleepPid) && alive(agentPid));
  // Agents ship output every 50 ms; a line not yet shipped dies with a SIGKILLed agent, as a
  // container's unflushed output would. Kill only once the first pass's line is stored.
  await waitFor("the first pass's line to be stored", async () => (await storedLog(server, run)).includes(`pass pid=${agentPid}`));
  process.kill(agentPid, "SIGKILL");
  await waitFor("the orphaned sleep to be ended", () => !alive(sleepPid), 10_000);

  const r = await server.cli(["follow", run], { timeoutMs: 90_000 });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const passes = fields(r.stdout, "pass").map((p) => Number(p["pid"]));
  assert.equal(passes.length, 2, r.stdout);
  assert.equal(passes[0], agentPid);
  assert.notEqual(passes[1], agentPid, "the second pass ran on a new agent");
  assert.equal(await readFile(join(dir, "killed-ran"), "utf8"), "ran\n", "the recorded step was replayed, not run again");
  const exited = serverLog("agent exited").find((l) => l["pid"] === agentPid);
  assert.equal(exited?.["signal"], "SIGKILL");
  assert.equal(exited?.["runId"], run);

  const after = await submit("after-kill.sh", 'echo "after pid=$FLOW_AGENT_PID"\n');
  assert.equal(after.r.code, 0, after.r.stdout + after.r.stderr);
  assert.equal(Number(fields(after.r.stdout, "after")[0]?.["pid"]), passes[1], "the new agent serves the next run");
});

void test("an agent is replaced after FLOWSVC_AGENT_MAX_JOBS jobs, by a fresh one started before the next job", async () => {
  // The idle timeout is far beyond the test, so no agent leaves for idleness between two submits
  // on a slow machine (each agent would then run one job and never reach its share).
  const own = await startTestServer({ agents: 2, env: { FLOWSVC_AGENT_MAX_JOBS: "2", FLOWSVC_AGENT_IDLE_MS: "600000" } });
  try {
    const pids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { r } = await on(own).submit(`share-${i}.sh`, 'echo "share pid=$FLOW_AGENT_PID"\n');
      assert.equal(r.code, 0, r.stdout + r.stderr);
      pids.push(fields(r.stdout, "share")[0]?.["pid"] ?? "");
    }
    for (const pid of new Set(pids))
      assert.ok(pids.filter((p) => p === pid).length <= 2, `no agent ran more than 2 jobs: ${pids.join(" ")}`);
    const reasons = (): string[] => serverLog("agent retiring", own).map((l) => String(l["reason"]));
    assert.ok(reasons().includes("it ran its share of jobs"), reasons().join(", "));
    // A retired agent is replaced at once, before the next job arrives: retiring leaves the pool its size.
    const order = readFileSync(join(own.dataDir, "server.log"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter(
        (l) =>
          l["msg"] === "job assigned" ||
          l["msg"] === "agent started" ||
          (l["msg"] === "agent retiring" && l["reason"] === "it ran its share of jobs"),
      )
      .map((l) => (l["msg"] === "agent retiring" ? "retired" : l["msg"] === "agent started" ? "started" : "assigned"));
    for (const [i, what] of order.entries()) {
      if (what !== "retired") continue;
      const upTo = order.indexOf("assigned", i);
      if (upTo > 0) assert.ok(order.slice(i, upTo).includes("started"), `a replacement started before the next job: ${order.join(" ")}`);
    }
    assert.ok(!reasons().includes("idle"), `no agent left for idleness: ${reasons().join(", ")}`);
  } finally {
    await own.stop();
  }
});

void test("an idle extra agent exits after FLOWSVC_AGENT_IDLE_MS and the last one stays to take the next job", async () => {
  const own = await startTestServer({ agents: 2, env: { FLOWSVC_AGENT_IDLE_MS: "300", FLOWSVC_LOG_LEVEL: "debug" } });
  try {
    const reasons = (): string[] => serverLog("agent retiring", own).map((l) => String(l["reason"]));
    // Two runs at once keep two agents busy; once both are idle, one of them leaves.
    const pair = await Promise.all(["pair-1.sh", "pair-2.sh"].map((name) => on(own).submit(name, 'echo "share pid=$FLOW_AGENT_PID"\n')));
    for (const { r } of pair) assert.equal(r.code, 0, r.stdout + r.stderr);
    const live = (): number[] =>
      serverLog("agent started", own)
        .map((l) => Number(l["pid"]))
        .filter(alive);
    await waitFor("an idle extra agent to exit", () => live().length === 1 && reasons().includes("idle"), 10_000);
    // The last one's idle timer has fired too, and it stayed: the launcher logs "agent stays".
    const stayed = live();
    await waitFor("the last idle agent's timer", () => serverLog("agent stays", own).some((l) => Number(l["pid"]) === stayed[0]), 10_000);
    assert.deepEqual(live(), stayed, "the last idle agent stays, so the next job does not wait for Node to start");
    const next = await on(own).submit("share-next.sh", 'echo "share pid=$FLOW_AGENT_PID"\n');
    assert.equal(next.r.code, 0, next.r.stdout + next.r.stderr);
    assert.equal(Number(fields(next.r.stdout, "share")[0]?.["pid"]), stayed[0], "the agent that stayed took the next job");
    // At debug the agents' own lines join the server's log: each script's pid, say.
    assert.ok(
      serverLog("agent says", own).some((l) => String(l["agent"]).includes('"msg":"script started"')),
      "the agents' info lines at --log-level debug",
    );
  } finally {
    await own.stop();
  }
});

void test("a killed server's idle agents exit at once and a busy one after its job; a clean stop ends the agents before it returns", async () => {
  const own = await startTestServer({ agents: 2 });
  try {
    const file = join(dir, "orphan.sh");
    await writeFile(
      file,
      `echo "$FLOW_AGENT_PID" > ${dir}/orphan-pid\nwhile [ ! -e ${dir}/orphan-go ]; do sleep 0.1; done\necho "the script ran on"\n`,
    );
    const submitted = await own.cli(["submit", file]);
    assert.equal(submitted.code, 0, submitted.stderr);
    const run = submitted.stdout.trim();
    await waitFor("the script to start", () =>
      readFile(join(dir, "orphan-pid"), "utf8").then(
        (t) => t.endsWith("\n"),
        () => false,
      ),
    );
    const busyPid = Number((await readFile(join(dir, "orphan-pid"), "utf8")).trim());
    // The job took the agent started with the server; the launcher started a spare, which waits.
    const idlePids = (): number[] =>
      serverLog("agent started", own)
        .map((l) => Number(l["pid"]))
        .filter((p) => p !== busyPid && alive(p));
    await waitFor("an idle spare agent", () => idlePids().length === 1, 10_000);
    const [idlePid = 0] = idlePids();

    await own.kill("SIGKILL");
    await waitFor("the idle agent of the killed server to exit", () => !alive(idlePid), 10_000);
    assert.ok(alive(busyPid), "the busy agent runs its job on, as a one-job agent would");
    await writeFile(join(dir, "orphan-go"), "");
    await own.restart();
    const followed = await own.cli(["follow", run], { timeoutMs: 90_000 });
    assert.equal(followed.code, 0, followed.stdout + followed.stderr);
    assert.match(followed.stdout, /the script ran on\n/);
    await waitFor("the busy agent to exit after its job", () => !alive(busyPid), 10_000);

    const again = await on(own).submit("again.sh", 'echo "again pid=$FLOW_AGENT_PID"\n');
    assert.equal(again.r.code, 0, again.r.stdout + again.r.stderr);
    const pid = Number(fields(again.r.stdout, "again")[0]?.["pid"]);
    await own.kill("SIGTERM");
    assert.equal(own.process.exitCode, 0);
    assert.ok(!alive(pid), "a clean stop leaves no agent behind");
  } finally {
    await own.stop();
  }
});
