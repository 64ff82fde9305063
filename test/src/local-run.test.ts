/**
 * `flow run <file>` through the real `flow` binary with no server anywhere (FLOWSVC_URL points at
 * a closed port): the file runs in place, in the current directory, with its durable primitives
 * served by the local engine; sleeps and waits really wait, and `flow signal` from another
 * process wakes a wait.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { access, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { FLOW_BIN, runFlow } from "./support/server.js";
import type { CliResult } from "./support/server.js";

let home: string;
let work: string;
let env: Record<string, string | undefined>;

/** An http URL nobody listens on. */
const closedUrl = async (): Promise<string> => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
};

before(async () => {
  home = await mkdtemp(join(tmpdir(), "flowsvc-local-run-"));
  work = await mkdtemp(join(tmpdir(), "flowsvc-local-cwd-"));
  env = {
    XDG_STATE_HOME: join(home, "state"),
    FLOWSVC_URL: await closedUrl(),
    FLOWSVC_CONFIG: join(home, "no-config.json"),
    FLOWSVC_TOKEN: undefined,
    FLOWSVC_PROJECT: undefined,
    FLOW_AGENT_SOCKET: undefined,
    FLOW_IDEMPOTENCY_KEY: undefined,
  };
});

after(async () => {
  await rm(home, { recursive: true, force: true });
  await rm(work, { recursive: true, force: true });
});

const script = async (name: string, source: string): Promise<string> => {
  await writeFile(join(work, name), source);
  return name;
};

const runIdIn = (stderr: string): string => {
  const id = /^local run (run-[0-9a-z]{26})$/m.exec(stderr)?.[1];
  assert.ok(id, `no "local run <id>" line in: ${stderr}`);
  return id;
};

const flowRun = (file: string): Promise<CliResult> => runFlow(["run", file], env, { cwd: work, timeoutMs: 30_000 });

const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

interface BackgroundRun {
  /** Resolves with the run id once `flow run` printed it. */
  readonly id: Promise<string>;
  /** Resolves once stdout holds `text`. */
  printed(text: string): Promise<void>;
  readonly done: Promise<CliResult>;
  kill(signal: NodeJS.Signals): void;
}

/** `flow run <file>` in the background, for the tests that talk to it while it runs. */
const startRun = (file: string): BackgroundRun => {
  const child = spawn(process.execPath, [FLOW_BIN, "run", file], {
    cwd: work,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const waiters: Array<() => void> = [];
  const poke = (): void => waiters.splice(0).forEach((w) => w());
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
    poke();
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
    poke();
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const done = new Promise<CliResult>((resolve) =>
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      poke();
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    }),
  );
  const until = async (ready: () => boolean): Promise<void> => {
    while (!ready()) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`flow run ended early:\n${stdout}\n${stderr}`);
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  return {
    id: until(() => /^local run run-/m.test(stderr)).then(() => runIdIn(stderr)),
    printed: (text) => until(() => stdout.includes(text)),
    done,
    kill: (signal) => void child.kill(signal),
  };
};

void test("a script runs in place: its steps run, it writes into the current directory, and its exit code is flow run's", async () => {
  const r = await flowRun(
    await script(
      "in-place.sh",
      `
echo "cwd=$(pwd)"
v=$(flow step greet -- echo hello)
echo "v=$v"
echo "$v" > written-here.txt
echo "to stderr" >&2
exit 7
`,
    ),
  );
  assert.equal(r.code, 7, r.stderr);
  const id = runIdIn(r.stderr);
  assert.match(r.stdout, new RegExp(`^cwd=${work}$`, "m"));
  assert.match(r.stdout, /^v=hello$/m);
  assert.match(r.stderr, /^to stderr$/m);
  assert.equal(await readFile(join(work, "written-here.txt"), "utf8"), "hello\n");
  assert.equal(
    await exists(join(env["XDG_STATE_HOME"]!, "flowsvc", "local", "runs", id)),
    false,
    "the run's directory is gone once it ended",
  );
});

void test("flow sleep really waits, in the same process", async () => {
  const started = Date.now();
  const r = await flowRun(await script("sleep.sh", "echo before\nflow sleep 1s\necho after\n"));
  const took = Date.now() - started;
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "before\nafter\n");
  assert.ok(took >= 1000, `the run took ${took} ms`);
});

void test("flow wait-signal blocks until flow signal from another process delivers the payload", async () => {
  const run = startRun(
    await script(
      "wait.sh",
      `
echo waiting
payload=$(flow wait-signal go)
echo "got=$payload"
`,
    ),
  );
  const id = await run.id;
  await run.printed("waiting\n");
  // Before or after the wait begins, the wait takes this signal (signals queue per name); that the
  // wait blocks until one arrives is local-engine.test.ts's "a wait blocks until its signal arrives".
  const sent = await runFlow(["signal", id, "go", "--payload", '{"a":1}'], env, { cwd: work });
  assert.equal(sent.code, 0, sent.stderr);
  assert.equal(sent.stdout, "");
  const r = await run.done;
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^got=\{"a":1\}$/m);
});

void test("a bounded wait that times out exits 124", async () => {
  const r = await flowRun(
    await script(
      "timeout.sh",
      `
flow wait-signal maybe --timeout 300ms || echo "exit=$?"
flow wait-signal never --timeout 200ms
echo unreachable
`,
    ),
  );
  assert.equal(r.code, 124, r.stderr);
  assert.equal(r.stdout, "exit=124\n");
});

void test("flow state keeps run-private values for the run and entity values across runs", async () => {
  const file = await script(
    "state.sh",
    `
echo "before=[$(flow state get color)]"
flow state set color blue
flow state set size '{"w":2}'
echo "color=$(flow state get color) size=$(flow state get size)"
echo "count=[$(flow state get count --entity acme)]"
flow state set count 1 --entity acme
`,
  );
  const first = await flowRun(file);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /^before=\[\]$/m);
  assert.match(first.stdout, /^color=blue size=\{"w":2\}$/m);
  assert.match(first.stdout, /^count=\[\]$/m);
  const second = await flowRun(file);
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stdout, /^before=\[\]$/m, "run-private values end with their run");
  assert.match(second.stdout, /^count=\[1\]$/m, "entity values outlive the run");
});

void test("Ctrl-C ends the script's processes and the run: exit 130, nothing left behind", async () => {
  const run = startRun(
    await script(
      "interrupted.sh",
      `
echo "$$" > interrupted.pid
echo started
sleep 30
echo never
`,
    ),
  );
  const id = await run.id;
  await run.printed("started\n");
  run.kill("SIGINT");
  const r = await run.done;
  assert.equal(r.code, 130, r.stderr);
  assert.doesNotMatch(r.stdout, /never/);
  const pid = Number(await readFile(join(work, "interrupted.pid"), "utf8"));
  assert.throws(() => process.kill(pid, 0), "the script's process is gone");
  assert.equal(await exists(join(env["XDG_STATE_HOME"]!, "flowsvc", "local", "runs", id)), false);
});

void test("what only a server runs is refused with the `flow submit` that runs it: call (hostile names too), emit, wait-event, spawn --as pipeline; a pipeline never reaches bash", async () => {
  await writeFile(join(work, "child.yaml"), "version: flowsvc/pipeline/v1\njobs: {}\n");
  const r = await flowRun(
    await script(
      "needs-server.sh",
      [
        'flow call graph deploy --input \'{"a":1}\' || echo "rc=$?"',
        "flow call graph '../../etc/passwd' || echo \"rc=$?\"",
        "flow call graph '%2e%2e%2f%00' || echo \"rc=$?\"",
        'flow call node \'LD_PRELOAD=/tmp/x.so\' --config \'{"url":"http://127.0.0.1:1"}\' || echo "rc=$?"',
        "flow call graph --definition - <<'DOC' || echo \"rc=$?\"",
        '{"version":"flowsvc-graph/v1","nodes":[],"edges":[]}',
        "DOC",
        'flow emit built || echo "rc=$?"',
        'flow wait-event deploy.done || echo "rc=$?"',
        'flow spawn --as pipeline child.yaml || echo "rc=$?"',
        "echo done",
        "",
      ].join("\n"),
    ),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `${"rc=1\n".repeat(8)}done\n`, r.stderr);
  const refusal = (what: string, why: string): string =>
    `error: ${what} needs a flowsvc server (${why}): run the script on one with \`flow submit needs-server.sh\``;
  const noBus = "a local run has no event bus or graphs";
  assert.deepEqual(
    r.stderr.split("\n").filter((l) => l.startsWith("error:")),
    [
      ...Array.from({ length: 5 }, () => refusal("flow call", noBus)),
      refusal("flow emit", noBus),
      refusal("flow wait-event", noBus),
      refusal("flow spawn --as pipeline", "a local run spawns scripts only"),
    ],
  );

  const yaml = await flowRun("child.yaml");
  assert.equal(yaml.code, 2);
  assert.equal(yaml.stdout, "");
  assert.equal(
    yaml.stderr,
    "error: flow run runs scripts; child.yaml is a pipeline, which runs on a flowsvc server: flow submit child.yaml\n" +
      "check it with `flow check child.yaml`, then submit it with `flow submit child.yaml --follow` (start a server with `flow server`); --interpreter runs the file as a script\n",
    "refused before a local run starts: bash never sees the YAML",
  );
});
