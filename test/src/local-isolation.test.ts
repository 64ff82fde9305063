/**
 * What local mode isolates, through a real `flow server`: as root its agents (and so the scripts)
 * run as the unprivileged `flowsvc-agent`, which cannot read the master key, the admin token, the
 * CLI login, server.log or the server's memory; and the agents' working directories do not outlive
 * their jobs, not even a server killed with SIGKILL.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { startTestServer, type TestServer } from "./support/server.js";
import { alive, waitFor } from "./support/wait.js";
import { childrenOf, statFields } from "./support/proc.js";
import { scriptDir } from "./support/script-dir.js";
import { runIdIn, runKit } from "./support/runs.js";

const asRoot = process.getuid?.() === 0;
const NOT_ROOT =
  "the tests do not run as root: the agents run as the server's user, which no test can change (README: What local mode isolates)";

let dir: string;

before(async () => {
  dir = await scriptDir("flowsvc-isolation-test-");
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Submits `source` on `server` and follows it: the run id, its exit code and its whole output. */
const submit = async (server: TestServer, name: string, source: string): Promise<{ run: string; code: number; out: string }> => {
  const { run, r } = await runKit(
    () => server,
    () => dir,
  ).submit(name, source);
  return { run, code: r.code, out: r.stdout + r.stderr };
};

/** Submits `source` on `server` without following it; answers the run id. */
const start = (server: TestServer, name: string, source: string): Promise<string> =>
  runKit(
    () => server,
    () => dir,
  ).start(name, source);

const workdirs = (server: TestServer): string[] => {
  try {
    return readdirSync(join(server.dataDir, "agents")).filter((n) => n.startsWith("agt-"));
  } catch {
    return [];
  }
};

/**
 * The process groups the agents started (their scripts): children of `agents`, or of a worker's
 * script spawner (agent-image/native/spawner.c, the agent's child), that lead a group.
 */
const scriptGroupsOf = (agents: readonly number[]): number[] =>
  agents
    .flatMap(childrenOf)
    .flatMap((p) => [p, ...childrenOf(p)])
    .filter((p) => Number(statFields(p)?.[2]) === p);

const uidOf = (pid: number): number => Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);

void test("as root, a script runs as flowsvc-agent and reads none of the master key, admin token, CLI login, server.log or the server's memory", async (t) => {
  if (!asRoot) return t.skip(NOT_ROOT);
  const canary = `canary-${randomBytes(12).toString("hex")}`;
  const server = await startTestServer({ embedded: true, agents: 1, env: { FLOWSVC_TEST_CANARY: canary } });
  try {
    const data = server.dataDir;
    const masterKey = (await readFile(join(data, "master.key"), "utf8")).trim();
    const pgPassword = (await readFile(join(data, "pg-password"), "utf8")).trim();
    assert.ok(masterKey.length > 20 && server.token.length > 20);
    assert.match(await readFile(server.configPath, "utf8"), new RegExp(server.token), "the CLI login holds the admin token");
    const serverPid = server.process.pid!;
    const targets = ["master.key", "admin.token", "server.log", "cli-config.json", "pg-password", "postgres.log", "pg/PG_VERSION"].map(
      (f) => join(data, f),
    );
    const { code, out } = await submit(
      server,
      "probe.sh",
      `
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) user=$(id -un) home=$HOME"
echo "agent-ppid=$(awk '{print $4}' /proc/$FLOW_AGENT_PID/stat)"
for f in ${targets.join(" ")}; do
  if cat "$f" >/dev/null 2>&1; then echo "READ $f"; else echo "DENIED $f"; fi
  cat "$f" 2>&1 | head -c 300
done
if ls ${data} >/dev/null 2>&1; then echo "READ list"; else echo "DENIED list"; fi
ls ${data} 2>&1 | head -c 300
for p in environ mem cmdline-ok; do
  f=/proc/${serverPid}/$p
  [ "$p" = cmdline-ok ] && continue
  if cat "$f" >/dev/null 2>&1; then echo "READ $p"; else echo "DENIED $p"; fi
  head -c 2000 "$f" 2>&1 | tr '\\0' '\\n'
done
if exec 3</proc/${serverPid}/mem; then echo "OPENED mem"; else echo "DENIED open-mem"; fi
if tr '\\0' '\\n' < /proc/$FLOW_AGENT_PID/environ | grep -q '^FLOW_JOB_TOKEN='; then echo "TOKEN in agent env"; else echo "no token in agent env"; fi
touch "$HOME/.probe" && echo "home writable"
touch "$PWD/probe" && echo "cwd writable"
echo "step=$(flow step who -- id -u)"
`,
    );
    assert.equal(code, 0, out);
    const uid = Number(/^uid=(\d+)/m.exec(out)?.[1]);
    assert.ok(Number.isInteger(uid) && uid !== 0, `the script ran as uid ${uid}:\n${out}`);
    assert.match(out, /user=flowsvc-agent /);
    assert.doesNotMatch(out, /groups=.*\b0\b/, "root's groups are dropped");
    assert.match(out, new RegExp(`^agent-ppid=${serverPid}$`, "m"), "the probe read the pid of the server the agent runs under");
    assert.match(out, new RegExp(`home=${data}/agent-home`));
    assert.match(out, new RegExp(`^step=${uid}$`, "m"), "a recorded step runs as the agent user too");
    for (const f of targets) assert.match(out, new RegExp(`^DENIED ${f}$`, "m"), `the script read ${f}:\n${out}`);
    for (const what of ["list", "environ", "mem", "open-mem"])
      assert.match(out, new RegExp(`^DENIED ${what}$`, "m"), `the script could ${what}:\n${out}`);
    assert.match(out, /^no token in agent env$/m);
    assert.match(out, /^home writable$/m);
    assert.match(out, /^cwd writable$/m);
    for (const [name, value] of [
      ["master key", masterKey],
      ["admin token", server.token],
      ["Postgres password", pgPassword],
      ["server environment", canary],
    ] as const) {
      assert.ok(!out.includes(value), `the ${name} reached the run's output`);
    }
    // The stored log, not just what follow showed.
    const runId = runIdIn(out);
    const logs = await server.cli(["follow", runId]);
    assert.equal(logs.code, 0, logs.stderr);
    for (const value of [masterKey, server.token, pgPassword, canary]) assert.ok(!logs.stdout.includes(value));
    // The agents are not root; the files the script was refused are root's and private.
    for (const pid of childrenOf(serverPid))
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("main.js")) assert.equal(uidOf(pid), uid);
    for (const f of ["master.key", "admin.token", "server.log", "cli-config.json", "pg-password"]) {
      const st = statSync(join(data, f));
      assert.equal(st.mode & 0o077, 0, `${f} is mode ${(st.mode & 0o777).toString(8)}`);
      assert.equal(st.uid, 0);
    }
    assert.equal(statSync(data).mode & 0o777, 0o701, "the data dir can be passed through, not listed");
  } finally {
    await server.stop();
  }
});

void test("as root, FLOWSVC_AGENT_USER naming root or the embedded Postgres user is refused at start with the reason", async (t) => {
  if (!asRoot) return t.skip(NOT_ROOT);
  for (const [name, why] of [
    ["root", /is root \(uid 0/],
    ["nobody", /embedded Postgres runs as "nobody"/],
    ["../etc", /FLOWSVC_AGENT_USER must be a user name/],
  ] as const) {
    await assert.rejects(startTestServer({ agents: 1, env: { FLOWSVC_AGENT_USER: name } }), (err: Error) => {
      assert.match(err.message, why);
      // The hint names a user worth creating, never `useradd --system root`.
      if (name !== "../etc") assert.match(err.message, /useradd --system flowsvc-agent\)/);
      return true;
    });
  }
});

void test("an agent's working directory is removed when its job ends and when the agent is killed mid-job", async () => {
  const server = await startTestServer({ agents: 1, leaseMs: 2000 });
  try {
    const { code, out } = await submit(
      server,
      "kill-agent.sh",
      `
echo "wd=$PWD"
flow step first -- echo first
if [ ! -e ${dir}/killed ]; then echo "wd=$PWD" > ${dir}/first-wd; touch ${dir}/killed; kill -9 "$FLOW_AGENT_PID"; sleep 60; fi
echo finished
`,
    );
    assert.equal(code, 0, out);
    assert.match(out, /finished/);
    // The first pass's own output line may die with its SIGKILLed agent before it is shipped: it also
    // wrote its directory to a file before the kill; the second pass's line is in the output.
    const agentOf = (text: string): string[] => [...text.matchAll(/wd=\S*\/(agt-[0-9a-z]+)/g)].map((m) => m[1]!);
    const seen = [...agentOf(readFileSync(join(dir, "first-wd"), "utf8")), ...agentOf(out).slice(-1)];
    assert.equal(seen.length, 2, `two passes:\n${out}`);
    assert.notEqual(seen[0], seen[1], `each pass in its own agent's working directory:\n${out}`);
    await waitFor("both passes' working directories to be removed", () =>
      seen.every((d) => !existsSync(join(server.dataDir, "agents", d))),
    );
    await waitFor("no working directory left", () => workdirs(server).length === 0);
    assert.ok(existsSync(join(dir, "killed")), "the first pass killed its agent");
  } finally {
    await server.stop();
  }
});

void test("working directories a server killed with SIGKILL left behind are removed at the next start", async () => {
  const server = await startTestServer({ agents: 2, leaseMs: 2000 });
  try {
    const run = await start(server, "long.sh", `flow step first -- echo first\nsleep 300\n`);
    await waitFor(
      "the job's script to run in its working directory",
      () =>
        workdirs(server).some((d) => existsSync(join(server.dataDir, "agents", d, "long.sh"))) &&
        scriptGroupsOf(childrenOf(server.process.pid!)).length > 0,
    );
    const left = workdirs(server);
    const agents = childrenOf(server.process.pid!);
    const pgids = scriptGroupsOf(agents);
    assert.ok(agents.length > 0);
    await server.kill("SIGKILL");
    for (const pid of agents) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone with its server
      }
    }
    await waitFor("the agents to end", () => agents.every((pid) => !alive(pid)));
    for (const pgid of pgids) {
      try {
        process.kill(-pgid, "SIGKILL"); // the orphaned script: a crash round leaves it to whoever finds it
      } catch {
        // ended with its agent
      }
    }
    await waitFor("the orphaned scripts to end", () => pgids.every((pgid) => !alive(pgid)));
    assert.ok(
      left.every((d) => existsSync(join(server.dataDir, "agents", d))),
      "the kill left the working directories behind",
    );
    await server.restart(); // resolves on the banner: the start is done
    for (const d of left) assert.equal(existsSync(join(server.dataDir, "agents", d)), false, `${d} survived the restart`);
    await server.cli(["cancel", run]);
    const ok = await submit(server, "after.sh", "echo after-restart\n");
    assert.equal(ok.code, 0, ok.out);
    assert.match(ok.out, /after-restart/);
  } finally {
    await server.stop();
  }
});

void test("a working directory a killed server's agent still works in survives the next start and goes when that agent is done", async () => {
  const server = await startTestServer({ agents: 1, leaseMs: 3000 });
  try {
    const go = join(dir, "go-orphan");
    const run = await start(
      server,
      "orphan.sh",
      `flow step first -- echo first\nwhile [ ! -e ${go} ]; do sleep 0.1; done\necho orphan-done\n`,
    );
    await waitFor(
      "the job's script to run in its working directory",
      () =>
        workdirs(server).some((d) => existsSync(join(server.dataDir, "agents", d, "orphan.sh"))) &&
        scriptGroupsOf(childrenOf(server.process.pid!)).length > 0,
    );
    const [held] = workdirs(server);
    const agents = childrenOf(server.process.pid!);
    await server.kill("SIGKILL"); // its agent finishes the job it holds (docs/internals.md)
    await server.restart();
    assert.ok(existsSync(join(server.dataDir, "agents", held!)), "the directory the orphaned agent's script runs in was left alone");
    await writeFile(go, "");
    await waitFor("the orphaned agent to finish", () => agents.every((pid) => !alive(pid)), 60_000);
    await waitFor("its working directory to be removed", () => !existsSync(join(server.dataDir, "agents", held!)), 30_000);
    const follow = await server.cli(["follow", run], { timeoutMs: 60_000 });
    assert.equal(follow.code, 0, follow.stdout + follow.stderr);
    assert.match(follow.stdout, /orphan-done/);
  } finally {
    await server.stop();
  }
});
