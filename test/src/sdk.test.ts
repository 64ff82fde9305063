/**
 * The Python and TypeScript SDKs (agent-image/sdk/python/flowsvc.py, agent-image/src/sdk/flowsvc.ts).
 * Each scenario runs one script per language and expects the same results from both.
 *
 * First against a scripted agent socket in this process (what the SDKs send, byte for byte: the
 * version, ids, fields, the step body's environment, the 2 MiB limit, the v2 check of a bounded
 * wait), then end to end through the real server and agent: steps that run once across a parking
 * sleep, stepFn, signal waits and a timed-out wait, state, calls of a stored graph and a node whose
 * child runs start once across a replay.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import type { Server } from "node:net";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { REPO_ROOT, startTestServer } from "./support/server.js";
import type { CliResult, TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { runIdIn } from "./support/runs.js";

// The SDKs as a user ships them beside a script: copied (in `before`) to where the scripts' user can
// read them. As root the local agents run as flowsvc-agent, which may not read the checkout (CI may
// clone into a 0700 directory). The TypeScript SDK is one self-contained ES module.
let PY_SDK_DIR: string;
let TS_SDK_URL: string;

// ---- the two languages -------------------------------------------------------------------------
//
// A scenario is written once per language with the same helpers: `out(k, v)` prints `k=<JSON>`,
// `attempt(k, f)` prints `k={"ok": result}` or the error as `{"step_failed", "stdout", "message"}`
// / `{"error": code, "message"}`. The test compares the printed map.

interface Lang {
  readonly name: "python" | "typescript";
  readonly ext: ".py" | ".mjs";
  readonly program: string;
  /** The script text: the prelude, then `body`. */
  script(body: string): string;
}

const python: Lang = {
  name: "python",
  ext: ".py",
  /** FLOWSVC_TEST_PYTHON runs the scripted-agent scenarios with another Python (the SDK supports 3.8+). */
  program: process.env["FLOWSVC_TEST_PYTHON"] ?? "python3",
  script: (body) => `import sys, json, os
sys.path.insert(0, ${JSON.stringify(PY_SDK_DIR)})
import flowsvc

def out(k, v):
    print(k + "=" + json.dumps(v), flush=True)

def attempt(k, f):
    try:
        out(k, {"ok": f()})
    except flowsvc.StepFailed as e:
        out(k, {"step_failed": e.exit_code, "stdout": e.stdout, "message": e.message})
    except flowsvc.FlowError as e:
        out(k, {"error": e.code, "message": e.message})

${body}
`,
};

const typescript: Lang = {
  name: "typescript",
  ext: ".mjs",
  program: process.execPath,
  script: (body) => `import * as flowsvc from ${JSON.stringify(TS_SDK_URL)};
import { appendFileSync } from "node:fs";

const out = (k, v) => console.log(k + "=" + JSON.stringify(v));

const attempt = async (k, f) => {
  try {
    out(k, { ok: (await f()) ?? null });
  } catch (e) {
    if (e instanceof flowsvc.StepFailed) out(k, { step_failed: e.exitCode, stdout: e.stdout, message: e.message });
    else if (e instanceof flowsvc.FlowError) out(k, { error: e.code, message: e.message });
    else throw e;
  }
};

${body}
`,
};

const LANGS = [python, typescript];

/** The `k=<JSON>` lines of a script's stdout; a key printed twice keeps every value. */
const printed = (stdout: string): Map<string, unknown[]> => {
  const map = new Map<string, unknown[]>();
  for (const line of stdout.split("\n")) {
    const m = /^([a-z_][a-z0-9_ ]*)=(.*)$/i.exec(line);
    if (!m) continue;
    let value: unknown;
    try {
      value = JSON.parse(m[2]!);
    } catch {
      continue;
    }
    map.set(m[1]!, [...(map.get(m[1]!) ?? []), value]);
  }
  return map;
};

/** The one value printed under `key`. */
const one = (values: Map<string, unknown[]>, key: string): unknown => {
  const all = values.get(key) ?? [];
  assert.equal(all.length, 1, `${key} printed ${all.length} times`);
  return all[0];
};

let dir: string;

before(async () => {
  dir = await scriptDir("flowsvc-sdk-test-");
  PY_SDK_DIR = join(dir, "sdk");
  await mkdir(PY_SDK_DIR);
  await copyFile(join(REPO_ROOT, "agent-image", "sdk", "python", "flowsvc.py"), join(PY_SDK_DIR, "flowsvc.py"));
  await copyFile(join(REPO_ROOT, "agent-image", "dist", "sdk", "flowsvc.js"), join(PY_SDK_DIR, "flowsvc.mjs"));
  TS_SDK_URL = pathToFileURL(join(PY_SDK_DIR, "flowsvc.mjs")).href;
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

// ---- a scripted agent --------------------------------------------------------------------------

type Request = Record<string, unknown>;
type Answer = Record<string, unknown> | undefined;

interface FakeAgent {
  readonly path: string;
  readonly requests: Request[];
  close(): Promise<void>;
}

let fakeCount = 0;

/** A socket that answers each request line with `answer(request)` (`v: 2` added unless given). */
const fakeAgent = async (answer: (request: Request) => Answer): Promise<FakeAgent> => {
  const path = join(dir, `agent-${++fakeCount}.sock`);
  const requests: Request[] = [];
  const server: Server = createServer((socket) => {
    let buffered = "";
    socket.setEncoding("utf8");
    socket.on("error", () => undefined);
    socket.on("data", (chunk: string) => {
      buffered += chunk;
      for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
        const request = JSON.parse(buffered.slice(0, nl)) as Request;
        buffered = buffered.slice(nl + 1);
        requests.push(request);
        const reply = answer(request);
        if (reply) socket.write(`${JSON.stringify({ v: 2, ...reply })}\n`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return { path, requests, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
};

const b64 = (text: string): string => Buffer.from(text, "utf8").toString("base64");
const unb64 = (data: unknown): string => Buffer.from(String(data), "base64").toString("utf8");

/** The environment of this process without any FLOW_* variable. */
const baseEnv = (): Record<string, string> => {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("FLOW_")) env[k] = v;
  return env;
};

let scriptCount = 0;

/** Runs a script of `lang` directly (no server), with FLOW_AGENT_SOCKET set when `socket` is given. */
const runScript = async (lang: Lang, body: string, socket?: string): Promise<CliResult> => {
  const file = join(dir, `script-${++scriptCount}${lang.ext}`);
  await writeFile(file, lang.script(body));
  return new Promise((resolve, reject) => {
    const child = spawn(lang.program, [file], {
      cwd: dir,
      env: { ...baseEnv(), ...(socket ? { FLOW_AGENT_SOCKET: socket } : {}) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr });
    });
  });
};

/** Every request carries v 2 and an integer id, and no two share an id. */
const assertEnvelope = (requests: readonly Request[]): void => {
  for (const r of requests) {
    assert.equal(r["v"], 2, JSON.stringify(r));
    assert.ok(Number.isInteger(r["id"]), JSON.stringify(r));
  }
  assert.equal(new Set(requests.map((r) => r["id"])).size, requests.length, "request ids are distinct");
};

const ops = (requests: readonly Request[]): unknown[] => requests.map((r) => r["op"]);

// Bodies per language. Python first, then the same in JavaScript.

const NEW_STEPS: Record<Lang["name"], string> = {
  python: `
os.environ["FLOW_OTHER"] = "x"
os.environ["KEEP_ME"] = "y"
attempt("env", lambda: flowsvc.step("env", ["sh", "-c", 'echo "key=$FLOW_IDEMPOTENCY_KEY other=\${FLOW_OTHER:-unset} socket=\${FLOW_AGENT_SOCKET:-unset} keep=$KEEP_ME"'], label="Env"))
attempt("big", lambda: flowsvc.step("big", ["sh", "-c", "head -c 2200000 /dev/zero"]))
attempt("fails", lambda: flowsvc.step("fails", ["sh", "-c", "echo partial; exit 3"]))
attempt("missing", lambda: flowsvc.step("missing", ["no-such-command-for-flowsvc"]))
attempt("fn", lambda: flowsvc.step_fn("fn", lambda: {"n": 1, "t": (1, "é")}))
def boom():
    raise ValueError("no luck")
attempt("boom", lambda: flowsvc.step_fn("boom", boom))
attempt("unserialisable", lambda: flowsvc.step_fn("unserialisable", lambda: {"f": object()}))
attempt("empty", lambda: flowsvc.step("empty", [""]))
`,
  typescript: `
process.env.FLOW_OTHER = "x";
process.env.KEEP_ME = "y";
await attempt("env", () => flowsvc.step("env", ["sh", "-c", 'echo "key=$FLOW_IDEMPOTENCY_KEY other=\${FLOW_OTHER:-unset} socket=\${FLOW_AGENT_SOCKET:-unset} keep=$KEEP_ME"'], { label: "Env" }));
await attempt("big", () => flowsvc.step("big", ["sh", "-c", "head -c 2200000 /dev/zero"]));
await attempt("fails", () => flowsvc.step("fails", ["sh", "-c", "echo partial; exit 3"]));
await attempt("missing", () => flowsvc.step("missing", ["no-such-command-for-flowsvc"]));
await attempt("fn", () => flowsvc.stepFn("fn", async () => ({ n: 1, t: [1, "é"] })));
await attempt("boom", () => flowsvc.stepFn("boom", () => { throw new Error("no luck"); }));
await attempt("unserialisable", () => flowsvc.stepFn("unserialisable", () => ({ f: 1n })));
await attempt("empty", () => flowsvc.step("empty", [""]));
`,
};

const REPLAYED_STEPS: Record<Lang["name"], string> = {
  python: `
def touch():
    open("ran", "a").write("ran\\n")
    return 1
attempt("a", lambda: flowsvc.step("a", ["sh", "-c", "echo ran >> ran"]))
attempt("b", lambda: flowsvc.step("b", ["sh", "-c", "echo ran >> ran"]))
attempt("c", lambda: flowsvc.step_fn("c", touch))
attempt("d", lambda: flowsvc.step_fn("d", touch))
attempt("e", lambda: flowsvc.step("e", ["sh", "-c", "echo ran >> ran"]))
attempt("f", lambda: len(flowsvc.step("f", ["sh", "-c", "echo ran >> ran"])))
`,
  typescript: `
const touch = () => { appendFileSync("ran", "ran\\n"); return 1; };
await attempt("a", () => flowsvc.step("a", ["sh", "-c", "echo ran >> ran"]));
await attempt("b", () => flowsvc.step("b", ["sh", "-c", "echo ran >> ran"]));
await attempt("c", () => flowsvc.stepFn("c", touch));
await attempt("d", () => flowsvc.stepFn("d", touch));
await attempt("e", () => flowsvc.step("e", ["sh", "-c", "echo ran >> ran"]));
await attempt("f", async () => (await flowsvc.step("f", ["sh", "-c", "echo ran >> ran"])).length);
`,
};

const WAITS: Record<Lang["name"], string> = {
  python: `
attempt("bounded", lambda: flowsvc.wait_signal("go", timeout=5))
attempt("go", lambda: flowsvc.wait_signal("go"))
attempt("late", lambda: flowsvc.wait_signal("late"))
attempt("event", lambda: flowsvc.wait_signal("event:x"))
attempt("sleep_number", lambda: flowsvc.sleep(1.5))
attempt("sleep_text", lambda: flowsvc.sleep("2m"))
attempt("sleep_zero", lambda: flowsvc.sleep(0))
`,
  typescript: `
await attempt("bounded", () => flowsvc.waitSignal("go", { timeout: 5 }));
await attempt("go", () => flowsvc.waitSignal("go"));
await attempt("late", () => flowsvc.waitSignal("late"));
await attempt("event", () => flowsvc.waitSignal("event:x"));
await attempt("sleep_number", () => flowsvc.sleep(1.5));
await attempt("sleep_text", () => flowsvc.sleep("2m"));
await attempt("sleep_zero", () => flowsvc.sleep(0));
`,
};

const ERRORS_EMIT_STATE: Record<Lang["name"], string> = {
  python: `
attempt("refused", lambda: flowsvc.step("x", ["true"]))
attempt("emit", lambda: flowsvc.emit("deploy.done", {"v": 1}, key="acme/web"))
attempt("emit_bare", lambda: flowsvc.emit("deploy.done"))
attempt("set", lambda: flowsvc.state.set("obj", {"a": [1, "two"]}, entity="e1"))
attempt("set_text", lambda: flowsvc.state.set("text", "42"))
attempt("get", lambda: flowsvc.state.get("obj", entity="e1"))
attempt("get_text", lambda: flowsvc.state.get("text"))
attempt("get_unset", lambda: flowsvc.state.get("unset"))
attempt("delete", lambda: flowsvc.state.delete("obj", entity="e1"))
attempt("list", lambda: flowsvc.state.list())
attempt("get_empty", lambda: flowsvc.state.get("empty"))
attempt("get_exact", lambda: flowsvc.state.get("exact"))
attempt("get_exact_unset", lambda: flowsvc.state.get("exact-unset"))
attempt("list_exact", lambda: flowsvc.state.list(entity="exact"))
`,
  typescript: `
await attempt("refused", () => flowsvc.step("x", ["true"]));
await attempt("emit", () => flowsvc.emit("deploy.done", { v: 1 }, { key: "acme/web" }));
await attempt("emit_bare", () => flowsvc.emit("deploy.done"));
await attempt("set", () => flowsvc.state.set("obj", { a: [1, "two"] }, { entity: "e1" }));
await attempt("set_text", () => flowsvc.state.set("text", "42"));
await attempt("get", () => flowsvc.state.get("obj", { entity: "e1" }));
await attempt("get_text", () => flowsvc.state.get("text"));
await attempt("get_unset", () => flowsvc.state.get("unset"));
await attempt("delete", () => flowsvc.state.delete("obj", { entity: "e1" }));
await attempt("list", () => flowsvc.state.list());
await attempt("get_empty", () => flowsvc.state.get("empty"));
await attempt("get_exact", () => flowsvc.state.get("exact"));
await attempt("get_exact_unset", () => flowsvc.state.get("exact-unset"));
await attempt("list_exact", () => flowsvc.state.list({ entity: "exact" }));
`,
};

const NO_SOCKET: Record<Lang["name"], string> = {
  python: `attempt("step", lambda: flowsvc.step("x", ["true"]))\nattempt("wait", lambda: flowsvc.wait_signal("go", timeout="1s"))`,
  typescript: `await attempt("step", () => flowsvc.step("x", ["true"]));\nawait attempt("wait", () => flowsvc.waitSignal("go", { timeout: "1s" }));`,
};

for (const lang of LANGS) {
  void describe(`${lang.name} SDK against a scripted agent`, () => {
    void test("a new step runs the command with the step environment and records stdout, exit and the 2 MiB overflow", async () => {
      let position = 0;
      const agent = await fakeAgent((r) => {
        if (r["op"] === "step")
          return { ok: true, replay: false, position: position++, idempotency_key: `idem-${position - 1}`, capture_ino: 1 };
        if (r["op"] === "step.complete" && r["overflow_bytes"] !== undefined) {
          return {
            ok: false,
            error: { code: "step_output_too_large", message: "step output is 2200000 bytes, 102848 bytes over the 2 MiB limit" },
            exit: 1,
          };
        }
        return { ok: true, exit: r["exit"] };
      });
      try {
        const r = await runScript(lang, NEW_STEPS[lang.name], agent.path);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const values = printed(r.stdout);
        assert.deepEqual(one(values, "env"), { ok: "key=idem-0 other=unset socket=unset keep=y\n" });
        assert.deepEqual(one(values, "big"), {
          step_failed: 1,
          stdout: "",
          message: "step output is 2200000 bytes, 102848 bytes over the 2 MiB limit",
        });
        assert.deepEqual(one(values, "fails"), { step_failed: 3, stdout: "partial\n", message: "step failed with exit code 3" });
        assert.deepEqual(one(values, "missing"), { step_failed: 127, stdout: "", message: "step failed with exit code 127" });
        assert.match(r.stderr, /no-such-command-for-flowsvc: command not found/);
        assert.deepEqual(one(values, "fn"), { ok: { n: 1, t: [1, "é"] } });
        assert.deepEqual(one(values, "boom"), { step_failed: 1, stdout: "no luck", message: "step failed with exit code 1" });
        const unserialisable = one(values, "unserialisable") as { step_failed: number; stdout: string };
        assert.equal(unserialisable.step_failed, 1);
        assert.match(unserialisable.stdout, /not JSON-serialisable/);
        assert.deepEqual(one(values, "empty"), { step_failed: 127, stdout: "", message: "step failed with exit code 127" });

        assertEnvelope(agent.requests);
        const steps = agent.requests.filter((q) => q["op"] === "step");
        assert.deepEqual(
          steps.map((q) => q["name"]),
          ["env", "big", "fails", "missing", "fn", "boom", "unserialisable", "empty"],
        );
        assert.equal(steps[0]!["label"], "Env");
        assert.ok(!("label" in steps[1]!), "no label field when none was given");
        const completes = agent.requests.filter((q) => q["op"] === "step.complete");
        assert.deepEqual(
          completes.map((q) => [q["position"], q["exit"]]),
          [
            [0, 0],
            [1, 0],
            [2, 3],
            [3, 127],
            [4, 0],
            [5, 1],
            [6, 1],
            [7, 127],
          ],
        );
        assert.equal(unb64(completes[0]!["stdout_b64"]), "key=idem-0 other=unset socket=unset keep=y\n");
        assert.equal(Buffer.from(String(completes[1]!["stdout_b64"]), "base64").length, 2 * 1024 * 1024, "the first 2 MiB are kept");
        assert.equal(completes[1]!["overflow_bytes"], 2_200_000, "overflow_bytes counts every byte");
        assert.ok(!("overflow_bytes" in completes[0]!));
        assert.equal(unb64(completes[4]!["stdout_b64"]), '{"n":1,"t":[1,"é"]}', "a stepFn result is recorded as compact JSON");
        assert.equal(unb64(completes[5]!["stdout_b64"]), "no luck");
      } finally {
        await agent.close();
      }
    });

    void test("a replayed step returns the record without running anything; recorded failures are raised again", async () => {
      const records: Record<string, Answer> = {
        a: { stdout_b64: b64("recorded\n"), exit: 0 },
        b: { stdout_b64: b64("partial\n"), exit: 3 },
        c: { stdout_b64: b64('{"x":[1,null]}'), exit: 0 },
        d: { stdout_b64: b64("no luck"), exit: 1 },
        e: { stdout_b64: "", exit: 1, stderr: "error: step output is 2200000 bytes, 102848 bytes over the 2 MiB limit\n" },
        f: { stdout_b64: b64("x".repeat(2 * 1024 * 1024)), exit: 0 }, // an answer of many reads
      };
      const agent = await fakeAgent((r) => ({ ok: true, replay: true, capture_ino: 1, ...records[String(r["name"])] }));
      try {
        await rm(join(dir, "ran"), { force: true });
        const r = await runScript(lang, REPLAYED_STEPS[lang.name], agent.path);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const values = printed(r.stdout);
        assert.deepEqual(one(values, "a"), { ok: "recorded\n" });
        assert.deepEqual(one(values, "b"), { step_failed: 3, stdout: "partial\n", message: "step failed with exit code 3" });
        assert.deepEqual(one(values, "c"), { ok: { x: [1, null] } });
        assert.deepEqual(one(values, "d"), { step_failed: 1, stdout: "no luck", message: "step failed with exit code 1" });
        assert.deepEqual(one(values, "e"), {
          step_failed: 1,
          stdout: "",
          message: "step output is 2200000 bytes, 102848 bytes over the 2 MiB limit",
        });
        assert.deepEqual(one(values, "f"), { ok: 2 * 1024 * 1024 });
        assert.deepEqual(ops(agent.requests), ["step", "step", "step", "step", "step", "step"], "nothing is completed on replay");
        await assert.rejects(readFile(join(dir, "ran")), "no step body ran");
      } finally {
        await agent.close();
      }
    });

    void test("waits: payloads, a timed-out wait is null, durations, event: refused, a bounded wait needs protocol v2", async () => {
      const agent = await fakeAgent((r) => {
        if (r["op"] === "hello") return { v: 1, ok: true, protocol: 1, agent_id: "agt-old" };
        if (r["op"] === "wait-signal" && r["name"] === "go") return { ok: true, stdout_b64: b64('{"a":1}\n') };
        if (r["op"] === "wait-signal") return { ok: true, exit: 124, stderr: "flow: wait-signal late timed out\n" };
        return { ok: true };
      });
      try {
        const r = await runScript(lang, WAITS[lang.name], agent.path);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const values = printed(r.stdout);
        const bounded = one(values, "bounded") as { error: string; message: string };
        assert.equal(bounded.error, "unsupported_protocol");
        assert.match(bounded.message, /^bounded waits need an agent that speaks socket protocol v2/);
        assert.deepEqual(one(values, "go"), { ok: { a: 1 } });
        assert.deepEqual(one(values, "late"), { ok: null });
        assert.equal((one(values, "event") as { error: string }).error, "invalid_argument");
        for (const k of ["sleep_number", "sleep_text", "sleep_zero"]) assert.deepEqual(one(values, k), { ok: null });

        assertEnvelope(agent.requests);
        // The bounded wait asked hello and stopped there; "event:x" never left the script.
        assert.deepEqual(ops(agent.requests), ["hello", "wait-signal", "wait-signal", "sleep", "sleep", "sleep"]);
        assert.deepEqual(
          agent.requests.filter((q) => q["op"] === "wait-signal").map((q) => [q["name"], "timeout" in q]),
          [
            ["go", false],
            ["late", false],
          ],
        );
        assert.deepEqual(
          agent.requests.filter((q) => q["op"] === "sleep").map((q) => q["duration"]),
          ["1500ms", "2m", "0ms"],
        );
      } finally {
        await agent.close();
      }
    });

    void test("an ok:false answer raises FlowError with the agent's code and message; emit and state requests", async () => {
      // Answers by "op" or "action:key-or-entity"; the "exact" ones come from an agent that also
      // answers the value itself (found/value, items): strings that read as JSON stay strings.
      const answers: Record<string, Answer> = {
        step: {
          ok: false,
          error: {
            code: "determinism",
            message: 'determinism error at call #0: the journal recorded step "a"#0 but the script called step "x"#0',
          },
          exit: 1,
        },
        emit: { ok: true, stdout_b64: b64("evt-01jd8k2m3n4p5q6r7s8t9v0w1x\n") },
        "get:obj": { ok: true, stdout_b64: b64('{"a":[1,"two"]}\n') },
        "get:text": { ok: true, stdout_b64: b64("42\n") },
        "get:empty": { ok: true, stdout_b64: b64("\n") },
        "get:unset": { ok: true },
        "get:exact": { ok: true, stdout_b64: b64("1.10\n"), found: true, value: "1.10" },
        "get:exact-unset": { ok: true, found: false },
        "list:": { ok: true, stdout_b64: b64('obj\t{"a":[1,"two"]}\nword\thello there\n') },
        "list:exact": {
          ok: true,
          stdout_b64: b64("v\t1.10\n"),
          items: [
            { key: "v", value: "1.10" },
            { key: "n", value: 2 },
          ],
        },
      };
      const agent = await fakeAgent((r) => {
        if (r["op"] !== "state") return answers[String(r["op"])];
        const which = r["action"] === "list" ? r["entity"] : r["key"];
        return answers[`${String(r["action"])}:${typeof which === "string" ? which : ""}`] ?? { ok: true };
      });
      try {
        const r = await runScript(lang, ERRORS_EMIT_STATE[lang.name], agent.path);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const values = printed(r.stdout);
        assert.deepEqual(one(values, "refused"), {
          error: "determinism",
          message: 'determinism error at call #0: the journal recorded step "a"#0 but the script called step "x"#0',
        });
        assert.deepEqual(one(values, "emit"), { ok: "evt-01jd8k2m3n4p5q6r7s8t9v0w1x" });
        assert.deepEqual(one(values, "get"), { ok: { a: [1, "two"] } });
        assert.deepEqual(one(values, "get_text"), { ok: 42 }, "a value that reads as JSON comes back parsed");
        assert.deepEqual(one(values, "get_unset"), { ok: null });
        assert.deepEqual(one(values, "list"), { ok: { obj: { a: [1, "two"] }, word: "hello there" } });
        assert.deepEqual(one(values, "get_empty"), { ok: "" }, "an empty string is set, not unset");
        assert.deepEqual(one(values, "get_exact"), { ok: "1.10" });
        assert.deepEqual(one(values, "get_exact_unset"), { ok: null });
        assert.deepEqual(one(values, "list_exact"), { ok: { v: "1.10", n: 2 } });

        assertEnvelope(agent.requests);
        const emits = agent.requests.filter((q) => q["op"] === "emit");
        assert.deepEqual(
          emits.map(({ type, key, payload }) => ({ type, key, payload })),
          [
            { type: "deploy.done", key: "acme/web", payload: { v: 1 } },
            { type: "deploy.done", key: undefined, payload: undefined },
          ],
        );
        const states = agent.requests
          .filter((q) => q["op"] === "state")
          .map(({ action, key, entity, value }) => ({ action, key, entity, value }));
        assert.deepEqual(states, [
          { action: "set", key: "obj", entity: "e1", value: '{"a":[1,"two"]}' },
          { action: "set", key: "text", entity: undefined, value: '"42"' },
          { action: "get", key: "obj", entity: "e1", value: undefined },
          { action: "get", key: "text", entity: undefined, value: undefined },
          { action: "get", key: "unset", entity: undefined, value: undefined },
          { action: "delete", key: "obj", entity: "e1", value: undefined },
          { action: "list", key: undefined, entity: undefined, value: undefined },
          { action: "get", key: "empty", entity: undefined, value: undefined },
          { action: "get", key: "exact", entity: undefined, value: undefined },
          { action: "get", key: "exact-unset", entity: undefined, value: undefined },
          { action: "list", key: undefined, entity: "exact", value: undefined },
        ]);
      } finally {
        await agent.close();
      }
    });

    void test("without FLOW_AGENT_SOCKET every call raises no_agent_socket", async () => {
      const r = await runScript(lang, NO_SOCKET[lang.name]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const values = printed(r.stdout);
      for (const k of ["step", "wait"])
        assert.deepEqual(one(values, k), { error: "no_agent_socket", message: "FLOW_AGENT_SOCKET is not set" });
    });
  });
}

// ---- end to end: the real server and agent ------------------------------------------------------

const DURABLE: Record<Lang["name"], (d: string) => string> = {
  python: (d) => `
d = ${JSON.stringify(d)}
open(d + "/passes", "a").write("pass\\n")
v = flowsvc.step("one", ["sh", "-c", "echo ran >> " + d + "/ran-one; echo one-$$"]).strip()
out("v", v)
def fn():
    open(d + "/ran-fn", "a").write("ran\\n")
    return {"n": 42, "v": v}
attempt("fn", lambda: flowsvc.step_fn("fn", fn))
attempt("fails", lambda: flowsvc.step("fails", ["sh", "-c", "echo ran >> " + d + "/ran-fails; echo partial; exit 3"]))
def boom():
    open(d + "/ran-boom", "a").write("ran\\n")
    raise ValueError("no luck")
attempt("boom", lambda: flowsvc.step_fn("boom", boom))
nested = "import sys; sys.path.insert(0, " + json.dumps(${JSON.stringify(PY_SDK_DIR)}) + ")\\nimport flowsvc\\ntry:\\n    flowsvc.step('inner', ['true'])\\nexcept flowsvc.FlowError as e:\\n    print(e.code + ': ' + e.message)"
attempt("nested", lambda: flowsvc.step("nested", [sys.executable, "-c", nested]))
attempt("key", lambda: flowsvc.step("key", ["sh", "-c", 'echo "$FLOW_IDEMPOTENCY_KEY"']))
flowsvc.sleep("1s")
out("after", v)
`,
  typescript: (d) => `
const d = ${JSON.stringify(d)};
appendFileSync(d + "/passes", "pass\\n");
const v = (await flowsvc.step("one", ["sh", "-c", "echo ran >> " + d + "/ran-one; echo one-$$"])).trim();
out("v", v);
await attempt("fn", () => flowsvc.stepFn("fn", async () => { appendFileSync(d + "/ran-fn", "ran\\n"); return { n: 42, v }; }));
await attempt("fails", () => flowsvc.step("fails", ["sh", "-c", "echo ran >> " + d + "/ran-fails; echo partial; exit 3"]));
await attempt("boom", () => flowsvc.stepFn("boom", () => { appendFileSync(d + "/ran-boom", "ran\\n"); throw new Error("no luck"); }));
const nested = "import { step } from " + JSON.stringify(${JSON.stringify(TS_SDK_URL)}) + "; try { await step('inner', ['true']); } catch (e) { console.log(e.code + ': ' + e.message); }";
await attempt("nested", () => flowsvc.step("nested", [process.execPath, "--input-type=module", "-e", nested]));
await attempt("key", () => flowsvc.step("key", ["sh", "-c", 'echo "$FLOW_IDEMPOTENCY_KEY"']));
await flowsvc.sleep("1s");
out("after", v);
`,
};

const SIGNALS: Record<Lang["name"], string> = {
  python: `
out("waiting", True)
attempt("go", lambda: flowsvc.wait_signal("go"))
attempt("never", lambda: flowsvc.wait_signal("never", timeout="1s"))
out("done", True)
`,
  typescript: `
out("waiting", true);
await attempt("go", () => flowsvc.waitSignal("go"));
await attempt("never", () => flowsvc.waitSignal("never", { timeout: "1s" }));
out("done", true);
`,
};

const STATE: Record<Lang["name"], string> = {
  python: `
flowsvc.state.set("obj", {"a": [1, "two"]})
flowsvc.state.set("word", "hello there", entity="sdk-py")
attempt("obj", lambda: flowsvc.state.get("obj"))
attempt("word", lambda: flowsvc.state.get("word", entity="sdk-py"))
attempt("unset", lambda: flowsvc.state.get("unset"))
attempt("list", lambda: flowsvc.state.list())
flowsvc.state.delete("obj")
attempt("deleted", lambda: flowsvc.state.get("obj"))
`,
  typescript: `
await flowsvc.state.set("obj", { a: [1, "two"] });
await flowsvc.state.set("word", "hello there", { entity: "sdk-typescript" });
await attempt("obj", () => flowsvc.state.get("obj"));
await attempt("word", () => flowsvc.state.get("word", { entity: "sdk-typescript" }));
await attempt("unset", () => flowsvc.state.get("unset"));
await attempt("list", () => flowsvc.state.list());
await flowsvc.state.delete("obj");
await attempt("deleted", () => flowsvc.state.get("obj"));
`,
};

/** Calls (issue 11 item 5): a stored graph, a node, a node whose child fails; then a sleep, so every call is replayed. */
const CALLS: Record<Lang["name"], (d: string) => string> = {
  python: (d) => `
open(${JSON.stringify(d)} + "/passes", "a").write("pass\\n")
attempt("graph", lambda: flowsvc.call_graph("sdk-called-python", {"x": 1}))
attempt("node", lambda: flowsvc.call_node("emit", {"type": "sdk.call.python", "payload": {"y": 2}}))
attempt("failed", lambda: flowsvc.call_node("http", {"url": "http://127.0.0.1:1/refused"}))
flowsvc.sleep("1s")
out("after", True)
`,
  typescript: (d) => `
appendFileSync(${JSON.stringify(d)} + "/passes", "pass\\n");
await attempt("graph", () => flowsvc.callGraph("sdk-called-typescript", { x: 1 }));
await attempt("node", () => flowsvc.callNode("emit", { type: "sdk.call.typescript", payload: { y: 2 } }));
await attempt("failed", () => flowsvc.callNode("http", { url: "http://127.0.0.1:1/refused" }));
await flowsvc.sleep("1s");
out("after", true);
`,
};

void describe("SDKs through the real server and agent", () => {
  let server: TestServer;

  before(async () => {
    // No test here is about lease expiry (a killed agent's job is requeued by the launcher at once):
    // a lease that a loaded host's pauses cannot lapse, so no pass runs twice by accident.
    server = await startTestServer({ leaseMs: 5000 });
  });

  after(async () => {
    await server?.stop();
  });

  const submit = async (lang: Lang, name: string, body: string, follow = true): Promise<{ run: string; r: CliResult }> => {
    const file = join(dir, `${name}${lang.ext}`);
    await writeFile(file, lang.script(body));
    const r = await server.cli(["submit", file, ...(follow ? ["--follow"] : [])], { timeoutMs: 90_000 });
    return { run: runIdIn(r.stdout + r.stderr), r };
  };

  const status = async (run: string): Promise<{ status: string; substate?: { name?: string } | null }> => {
    const r = await server.cli(["status", run, "-o", "json"]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as { status: string; substate?: { name?: string } | null };
  };

  const lines = async (path: string): Promise<number> => (await readFile(path, "utf8").catch(() => "")).split("\n").filter(Boolean).length;

  for (const lang of LANGS) {
    void test(`${lang.name}: step and stepFn run once across a sleep that parks the run and replays the script`, async () => {
      const d = await scriptDir(`durable-${lang.name}-`, dir);
      const { run, r } = await submit(lang, `durable-${lang.name}`, DURABLE[lang.name](d));
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.equal(await lines(join(d, "passes")), 2, "the sleep parked the run and the script was replayed once");
      for (const f of ["ran-one", "ran-fn", "ran-fails", "ran-boom"]) assert.equal(await lines(join(d, f)), 1, `${f}: the body ran once`);

      const values = printed(r.stdout);
      const v = values.get("v") ?? [];
      assert.equal(v.length, 2);
      assert.match(String(v[0]), /^one-\d+$/);
      assert.equal(v[1], v[0], "the replayed step returned the recorded stdout");
      assert.deepEqual(values.get("after"), [v[0]], "after the sleep, once");
      const twice = (key: string, expected: unknown): void => assert.deepEqual(values.get(key), [expected, expected], key);
      twice("fn", { ok: { n: 42, v: v[0] } });
      twice("fails", { step_failed: 3, stdout: "partial\n", message: "step failed with exit code 3" });
      twice("boom", { step_failed: 1, stdout: "no luck", message: "step failed with exit code 1" });
      twice("nested", { ok: "no_agent_socket: FLOW_AGENT_SOCKET is not set\n" });
      const keys = values.get("key") as Array<{ ok: string }>;
      assert.equal(keys.length, 2);
      assert.ok(keys[0]!.ok.trim().length > 0, "FLOW_IDEMPOTENCY_KEY is set in the step body");
      assert.equal(keys[1]!.ok, keys[0]!.ok, "the same key on replay");

      const steps = await server.cli(["steps", run, "-o", "json"]);
      assert.equal(steps.code, 0, steps.stderr);
      const recorded = (JSON.parse(steps.stdout) as Array<{ name: string; exit_code?: number }>).filter((s) => s.name !== "");
      assert.deepEqual(
        recorded.map((s) => s.name).filter((n) => n !== "sleep"),
        ["one", "fn", "fails", "boom", "nested", "key"],
      );
    });

    void test(`${lang.name}: waitSignal returns the payload sent with flow signal; a timed-out wait returns null`, async () => {
      const { run } = await submit(lang, `signal-${lang.name}`, SIGNALS[lang.name], false);
      const deadline = Date.now() + 60_000;
      for (let s = await status(run); s.status !== "parked"; s = await status(run)) {
        assert.ok(!["succeeded", "failed", "cancelled"].includes(s.status), `the run ended ${s.status} before the signal`);
        assert.ok(Date.now() < deadline, "the run never parked on the signal");
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const sent = await server.cli(["signal", run, "go", "--payload", '{"n":1,"s":"x"}']);
      assert.equal(sent.code, 0, sent.stdout + sent.stderr);
      const r = await server.cli(["follow", run], { timeoutMs: 90_000 });
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const values = printed(r.stdout);
      const go = values.get("go") ?? [];
      assert.ok(go.length >= 1, r.stdout);
      for (const g of go) assert.deepEqual(g, { ok: { n: 1, s: "x" } });
      assert.deepEqual(values.get("never"), [{ ok: null }], "the bounded wait timed out to null");
      assert.deepEqual(values.get("done"), [true]);
    });

    void test(`${lang.name}: callGraph and callNode print the child's output; the replay after a sleep starts no second child`, async () => {
      const stored = {
        version: "flowsvc-graph/v1",
        nodes: [{ id: "e", type: "emit", config: { type: `sdk.stored.${lang.name}`, payload: { $expr: "input" } } }],
        edges: [],
      };
      const file = join(dir, `called-${lang.name}.json`);
      await writeFile(file, JSON.stringify(stored));
      const set = await server.cli(["graph", "set", `sdk-called-${lang.name}`, file]);
      assert.equal(set.code, 0, set.stdout + set.stderr);
      const d = await scriptDir(`calls-${lang.name}-`, dir);
      // Submitted, then followed: the log names the child runs, so the run id is taken from the submit alone.
      const { run } = await submit(lang, `calls-${lang.name}`, CALLS[lang.name](d), false);
      const r = await server.cli(["follow", run], { timeoutMs: 90_000 });
      assert.equal(r.code, 0, r.stdout + r.stderr);
      // Each call parks the run until its child ends, and the sleep once more: five passes.
      const passes = await lines(join(d, "passes"));
      assert.equal(passes, 5, "each call and the sleep parked the run, and the script was replayed after each");
      const values = printed(r.stdout);
      const replayed = (key: string, times: number): unknown => {
        const all = values.get(key) ?? [];
        assert.equal(all.length, times, `${key}: printed on every pass after its child ended\n${r.stdout}`);
        for (const v of all) assert.deepEqual(v, all[0], `${key}: every replay returned the recorded output`);
        return all[0];
      };
      const graph = replayed("graph", 4) as { ok: { nodes: { e: { event_id: string } } } };
      assert.match(graph.ok.nodes.e.event_id, /^evt-/, JSON.stringify(graph));
      assert.match((replayed("node", 3) as { ok: { event_id: string } }).ok.event_id, /^evt-/);
      const failed = replayed("failed", 2) as { error: string; message: string };
      assert.equal(failed.error, "call_failed");
      assert.match(failed.message, /^child run run-\w+ failed: /);
      assert.deepEqual(values.get("after"), [true]);

      const db = new pg.Pool({ connectionString: server.databaseUrl, max: 1 });
      try {
        const children = await db.query<{ filename: string; n: number }>(
          "select filename, count(*)::int as n from runs where parent_run_id = $1 group by filename order by filename",
          [run],
        );
        assert.deepEqual(children.rows, [
          { filename: `graph:sdk-called-${lang.name}`, n: 1 },
          { filename: "node:emit", n: 1 },
          { filename: "node:http", n: 1 },
        ]);
        const events = await db.query<{ type: string; payload: unknown }>(
          "select type, payload from events where type in ($1, $2) order by seq",
          [`sdk.stored.${lang.name}`, `sdk.call.${lang.name}`],
        );
        assert.deepEqual(events.rows, [
          { type: `sdk.stored.${lang.name}`, payload: { x: 1 } },
          { type: `sdk.call.${lang.name}`, payload: { y: 2 } },
        ]);
      } finally {
        await db.end();
      }
    });

    void test(`${lang.name}: state set, get, list and delete`, async () => {
      const { r } = await submit(lang, `state-${lang.name}`, STATE[lang.name]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const values = printed(r.stdout);
      assert.deepEqual(one(values, "obj"), { ok: { a: [1, "two"] } });
      assert.deepEqual(one(values, "word"), { ok: "hello there" });
      assert.deepEqual(one(values, "unset"), { ok: null });
      assert.deepEqual(one(values, "list"), { ok: { obj: { a: [1, "two"] } } }, "run-private keys only, without an entity");
      assert.deepEqual(one(values, "deleted"), { ok: null });
    });
  }
});
