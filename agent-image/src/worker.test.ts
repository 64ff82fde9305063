import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, readdir, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { LogChunk } from "@flowsvc/core";
import { FlowError } from "@flowsvc/core";
import { fakeBackend, scriptClaim, type FakeBackend } from "./agent-test-kit.js";
import type { AnyClaim } from "./backend.js";
import type { WorkerAgentConfig } from "./config.js";
import { silentLogger } from "./logger.js";
import { startWorker, type AgentWorker, type WorkerJob, type WorkerReply } from "./worker.js";

let dir: string;
before(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), "fa-worker-")));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const config: WorkerAgentConfig = {
  mode: "worker",
  serverUrl: "http://127.0.0.1:9",
  capabilities: [],
  clientDir: undefined,
  agentEnv: { PATH: `${dirname(process.execPath)}:/usr/bin:/bin`, HOME: "/nonexistent" },
  logLevel: "info",
};

/** The launcher's end of the channel: what the worker sent, and ways to talk to it. */
const launcherEnd = () => {
  const sent: WorkerReply[] = [];
  /** The `group` messages (each job's script's process group), apart: the others are counted by `until`. */
  const groups: WorkerReply[] = [];
  let deliver: (m: unknown) => void = () => undefined;
  let disconnect: () => void = () => undefined;
  let wake: () => void = () => undefined;
  return {
    sent,
    groups,
    channel: {
      send: (m: WorkerReply) => {
        if (m.type === "group") {
          groups.push(m);
          return;
        }
        sent.push(m);
        wake();
      },
      onMessage: (l: (m: unknown) => void) => (deliver = l),
      onDisconnect: (l: () => void) => (disconnect = l),
    },
    deliver: (m: unknown) => deliver(m),
    disconnect: () => disconnect(),
    /** Resolves once the worker sent `n` messages in all. */
    until: async (n: number): Promise<void> => {
      while (sent.length < n) await new Promise<void>((r) => (wake = r));
    },
  };
};

const job = (n: number): WorkerJob => ({
  type: "job",
  jobId: `job-${n}`,
  runId: `run-${n}`,
  attempt: 1,
  token: `tok-${n}`,
  agentId: `agt-${n}`,
  workdir: join(dir, `agt-${n}`),
});

/** A worker whose jobs claim `claims[token]` from a fake backend of their own. */
const worker = (claims: Record<string, AnyClaim | Error>, workerConfig: WorkerAgentConfig = config) => {
  const end = launcherEnd();
  const backends: Array<[string, FakeBackend]> = [];
  const w: AgentWorker = startWorker({
    config: workerConfig,
    channel: end.channel,
    logger: silentLogger,
    agentPid: 4242,
    timings: { killGraceMs: 300, drainMs: 200, logIntervalMs: 10 },
    backendFor: (j) => {
      const claim = claims[j.token]!;
      const b = fakeBackend({
        claim: () => (claim instanceof Error ? Promise.reject(claim) : Promise.resolve(claim)),
        finish: () => Promise.resolve("succeeded"),
      });
      backends.push([j.token, b]);
      return b;
    },
  });
  return { w, end, backends };
};

const stdoutOf = (b: FakeBackend): string =>
  b.calls
    .filter(([m]) => m === "log")
    .flatMap(([, c]) => c as LogChunk[])
    .filter((c) => c.stream === "stdout")
    .map((c) => c.data)
    .join("");

/** Resolves with the first job's backend once its script printed "started". */
const running = async (backends: Array<[string, FakeBackend]>): Promise<FakeBackend> => {
  for (;;) {
    const found = backends[0]?.[1];
    if (found && stdoutOf(found).includes("started")) return found;
    await new Promise((r) => setTimeout(r, 20));
  }
};

const listeners = (): Record<string, number> => Object.fromEntries(process.eventNames().map((e) => [String(e), process.listenerCount(e)]));

void test("a worker runs jobs one after another, each with its own token, agent id, env and masks, and answers done for each", async () => {
  const source = 'echo "id=$FLOW_AGENT_ID pid=$FLOW_AGENT_PID secret=${SECRET:-unset}"; echo "literal s3cr3t-one"\n';
  const { w, end, backends } = worker({
    "tok-1": scriptClaim({ job_id: "job-1", source, env: { SECRET: "s3cr3t-one" }, masks: ["s3cr3t-one"] }),
    "tok-2": scriptClaim({ job_id: "job-2", source }),
  });
  await end.until(1);
  const before = listeners();
  end.deliver(job(1));
  await end.until(2);
  end.deliver(job(2));
  await end.until(3);
  assert.deepEqual(end.sent, [
    { type: "ready" },
    { type: "done", jobId: "job-1", outcome: "finished" },
    { type: "done", jobId: "job-2", outcome: "finished" },
  ]);
  assert.deepEqual(
    backends.map(([t]) => t),
    ["tok-1", "tok-2"],
  );
  const [[, one], [, two]] = backends as [[string, FakeBackend], [string, FakeBackend]];
  assert.equal(stdoutOf(one), "id=agt-1 pid=4242 secret=***\nliteral ***\n");
  assert.equal(stdoutOf(two), "id=agt-2 pid=4242 secret=unset\nliteral s3cr3t-one\n", "job 2 has neither job 1's env nor its masks");
  assert.deepEqual(one.calls[0], ["claim", { agent_id: "agt-1", capabilities: [] }]);
  assert.deepEqual(two.calls[0], ["claim", { agent_id: "agt-2", capabilities: [] }]);
  assert.deepEqual(listeners(), before, "no listener on process was left behind");
  await assert.rejects(
    readdir(job(1).workdir),
    { code: "ENOENT" },
    "the worker removed the job's directory (its scratch files) before done",
  );
  assert.deepEqual(
    end.groups.map((m) => m.type === "group" && m.jobId),
    ["job-1", "job-2"],
    "each job told the launcher its script's process group",
  );
  for (const m of end.groups) assert.ok(m.type === "group" && Number.isInteger(m.pgid) && m.pgid > 1);
  w.stop("test");
  assert.equal(await w.exited, 0);
});

void test("FLOW_AGENT_SPAWNER=off: the worker starts its scripts itself; by default the native spawner starts them where it was built", async () => {
  const source = 'echo "parent=$(cat /proc/$PPID/comm)"\n';
  const parentOf = async (workerConfig: WorkerAgentConfig, n: number): Promise<string> => {
    const { w, end, backends } = worker({ [`tok-${n}`]: scriptClaim({ job_id: `job-${n}`, source }) }, workerConfig);
    await end.until(1);
    end.deliver(job(n));
    await end.until(2);
    w.stop("test");
    assert.equal(await w.exited, 0);
    return stdoutOf(backends[0]![1]);
  };
  const self = readFileSync("/proc/self/comm", "utf8").trim();
  assert.equal(await parentOf({ ...config, spawner: false }, 1), `parent=${self}\n`, "off: the worker's own process");
  if (existsSync(fileURLToPath(new URL("../libexec/flow-spawner", import.meta.url))))
    assert.equal(await parentOf(config, 2), "parent=flow-spawner\n", "unset: the spawner");
});

void test("a stop while a job runs ends its script by the stop path, sends no done and exits 0", async () => {
  const { w, end, backends } = worker({ "tok-1": scriptClaim({ source: "echo started; sleep 30\n" }) });
  end.deliver(job(1));
  const b = await running(backends);
  const t = Date.now();
  w.stop("SIGTERM");
  assert.equal(await w.exited, 0);
  assert.ok(Date.now() - t < 5_000);
  assert.deepEqual(end.sent, [{ type: "ready" }]);
  assert.ok(!b.calls.some(([m]) => m === "finish"), "a stopped job is not finished");
});

void test("when the launcher goes away (the server died) the running job runs to its end, then the worker exits 0", async () => {
  const go = join(dir, "disconnect-go");
  const source = `echo started; while [ ! -e ${go} ]; do sleep 0.05; done; echo finished\n`;
  const { w, end, backends } = worker({ "tok-1": scriptClaim({ source }) });
  end.deliver(job(1));
  await running(backends);
  end.disconnect();
  end.deliver(job(2)); // never taken: nobody would hear its done
  await writeFile(go, "");
  assert.equal(await w.exited, 0);
  assert.deepEqual(end.sent, [{ type: "ready" }]);
  assert.deepEqual(
    backends.map(([t]) => t),
    ["tok-1"],
  );
  const [[, b]] = backends as [[string, FakeBackend]];
  assert.equal(stdoutOf(b), "started\nfinished\n");
  assert.ok(
    b.calls.some(([m]) => m === "finish"),
    "the job was finished, not stopped",
  );
});

void test("a message that does not parse is logged and the worker exits 2 without running anything", async () => {
  for (const bad of [{ type: "job", jobId: "job-1" }, { type: "hello" }, "job", { ...job(1), workdir: "relative" }]) {
    const { w, end, backends } = worker({});
    end.deliver(bad);
    assert.equal(await w.exited, 2);
    assert.equal(backends.length, 0);
  }
});

void test("a second job while one runs is a launcher bug: the running job is stopped and the worker exits 2", async () => {
  const { w, end, backends } = worker({ "tok-1": scriptClaim({ source: "sleep 30\n" }), "tok-2": scriptClaim({}) });
  end.deliver(job(1));
  end.deliver(job(2));
  assert.equal(await w.exited, 2);
  assert.deepEqual(
    backends.map(([t]) => t),
    ["tok-1"],
  );
  assert.deepEqual(end.sent, [{ type: "ready" }]);
});

void test("an agent failure (runJob rejects) exits 1 with no done, so the launcher requeues and starts a fresh agent", async () => {
  const { w, end } = worker({ "tok-1": new FlowError("internal", "the server's answer to claim is malformed") });
  end.deliver(job(1));
  assert.equal(await w.exited, 1);
  assert.deepEqual(end.sent, [{ type: "ready" }]);
});
