import { test } from "node:test";
import assert from "node:assert/strict";
import { HANDLER_CAPABILITIES, HANDLER_INTERPRETER, newRunDefaults } from "./run-defaults.js";
import { SCRIPT_WORKFLOW } from "./workflow-types.js";

const base = { id: "run-1", projectId: "prj-1", source: "echo hi\n", filename: "deploy.sh", trusted: false };

test("a request with only what has no default becomes a manual script run needing no capability", () => {
  assert.deepEqual(newRunDefaults(base), {
    ...base,
    workflow: SCRIPT_WORKFLOW,
    interpreter: ["bash", "-eu"],
    env: {},
    tags: [],
    trigger: { type: "manual" },
    idempotencyKey: null,
    createdBy: null,
    parentRunId: null,
    retry: null,
    rerunOf: null,
    capabilities: [],
    handlerName: null,
    eventId: null,
    generation: 0,
  });
});

test("the interpreter is picked by extension unless given; what is given is kept as given", () => {
  assert.deepEqual(newRunDefaults({ ...base, filename: "dir.d/x.Ts" }).interpreter, ["bun", "run"]);
  assert.deepEqual(newRunDefaults({ ...base, filename: "x.py", interpreter: ["python3", "-u"] }).interpreter, ["python3", "-u"]);
  const r = newRunDefaults({
    ...base,
    tags: ["env:prod"],
    env: { A: "1" },
    capabilities: ["gpu"],
    retry: { attempts: 2, backoff_ms: 5 },
    trusted: true,
  });
  assert.deepEqual(
    [r.tags, r.env, r.capabilities, r.retry, r.trusted],
    [["env:prod"], { A: "1" }, ["gpu"], { attempts: 2, backoff_ms: 5 }, true],
  );
});

test("a handler's run runs under bash -eu and needs polyglot whatever its file or the request says (spec: Handler)", () => {
  const r = newRunDefaults({
    ...base,
    filename: "h.py",
    interpreter: ["python3"],
    capabilities: [],
    handler: { name: "h", eventId: "evt-1", generation: 3 },
  });
  assert.deepEqual(
    [r.interpreter, r.capabilities, r.handlerName, r.eventId, r.generation],
    [["bash", "-eu"], ["polyglot"], "h", "evt-1", 3],
  );
  assert.deepEqual([HANDLER_INTERPRETER, HANDLER_CAPABILITIES], [["bash", "-eu"], ["polyglot"]]);
});

test("the run's arrays and maps are its own: changing the request afterwards changes nothing", () => {
  const tags = ["a"];
  const env = { A: "1" };
  const r = newRunDefaults({ ...base, tags, env });
  tags.push("b");
  env.A = "2";
  assert.deepEqual([r.tags, r.env], [["a"], { A: "1" }]);
  const h = newRunDefaults({ ...base, handler: { name: "h", eventId: "e", generation: 1 } });
  h.interpreter.push("-x");
  assert.deepEqual(HANDLER_INTERPRETER, ["bash", "-eu"]);
});

test("a person's submission (POST .../runs, a FlowRun from kubectl) is one rule: manual, trusted, defaults from here", async () => {
  const { RunSubmission, personSubmittedRun } = await import("./resources/run.js");
  const who = { projectId: "prj-1", sender: "kubernetes:team-a/nightly", createdBy: null, idempotencyKey: "uid-1" };
  const plain = newRunDefaults({
    id: "run-1",
    ...personSubmittedRun(RunSubmission.parse({ kind: "script", source: "print(1)\n", filename: "job.py" }), who),
  });
  assert.deepEqual(
    { trusted: plain.trusted, trigger: plain.trigger, workflow: plain.workflow, interpreter: plain.interpreter, key: plain.idempotencyKey },
    {
      trusted: true,
      trigger: { type: "manual", sender: "kubernetes:team-a/nightly" },
      workflow: SCRIPT_WORKFLOW,
      interpreter: ["python3"],
      key: "uid-1",
    },
  );
  // What the body says wins over the filename's default; the submission's other fields pass as they are.
  const body = RunSubmission.parse({
    kind: "script",
    source: "x",
    filename: "job.py",
    interpreter: ["python3", "-X", "dev"],
    env: { A: "1" },
    tags: ["t"],
    retry: { attempts: 3 },
  });
  const run = newRunDefaults({ id: "run-2", ...personSubmittedRun(body, { ...who, createdBy: "usr-1", sender: "ada" }) });
  assert.deepEqual(
    { interpreter: run.interpreter, env: run.env, tags: run.tags, retry: run.retry, createdBy: run.createdBy },
    { interpreter: ["python3", "-X", "dev"], env: { A: "1" }, tags: ["t"], retry: { attempts: 3, backoff_ms: 0 }, createdBy: "usr-1" },
  );
});
