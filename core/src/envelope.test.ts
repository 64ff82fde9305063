import { test } from "node:test";
import assert from "node:assert/strict";
import { buildEnvelope, celEventVars, envelopeTriggerEnv } from "./envelope.js";
import { compileCel, evaluatePredicate } from "./cel.js";

const pushEvent = {
  id: "prj-1/evt-0001",
  type: "gh.push",
  key: "octo/app",
  payload: { ref: "refs/heads/main", commits: [{ id: "abc" }] },
  fields: {
    ref: "refs/heads/main",
    sha: "0123456789abcdef0123456789abcdef01234567",
    repo: "octo/app",
    sender: "mona",
    paths: ["src/a.ts", "docs/x.md"],
    paths_known: true,
    forge: "github",
  },
};

void test("a custom event's envelope is type, event id, key and payload", () => {
  assert.deepEqual(buildEnvelope({ id: "evt-1", type: "deploy", key: "o/r", payload: { n: 1 } }), {
    type: "deploy",
    event: "evt-1",
    key: "o/r",
    payload: { n: 1 },
  });
  const broadcast = buildEnvelope({ id: "evt-2", type: "deploy", key: null, payload: undefined });
  assert.deepEqual(broadcast, { type: "deploy", event: "evt-2", payload: null });
  assert.equal("key" in broadcast, false);
});

void test("forge-shaped events add their scalar fields; unknown or mistyped fields are dropped", () => {
  const envelope = buildEnvelope(pushEvent);
  assert.deepEqual(envelope, {
    type: "gh.push",
    event: "prj-1/evt-0001",
    key: "octo/app",
    payload: pushEvent.payload,
    ref: "refs/heads/main",
    sha: pushEvent.fields.sha,
    repo: "octo/app",
    sender: "mona",
    forge: "github",
    paths: ["src/a.ts", "docs/x.md"],
    paths_known: true,
  });
  const odd = buildEnvelope({
    id: "e",
    type: "t",
    payload: 1,
    fields: { sha: 42, paths: ["a", 1], secret: "x", head_ref: "f", paths_known: "yes" },
  });
  assert.deepEqual(odd, { type: "t", event: "e", payload: 1, head_ref: "f" });
});

void test("CI_TRIGGER_* carries the type, the event id and the scalar fields present", () => {
  assert.deepEqual(envelopeTriggerEnv(buildEnvelope(pushEvent)), {
    CI_TRIGGER_EVENT: "gh.push",
    CI_TRIGGER_EVENT_ID: "prj-1/evt-0001",
    CI_TRIGGER_SHA: pushEvent.fields.sha,
    CI_TRIGGER_SHORT_SHA: "0123456",
    CI_TRIGGER_REF: "refs/heads/main",
    CI_TRIGGER_REPO: "octo/app",
    CI_TRIGGER_SENDER: "mona",
    CI_TRIGGER_FORGE: "github",
  });
  assert.deepEqual(envelopeTriggerEnv(buildEnvelope({ id: "evt-9", type: "deploy", payload: { sha: "nested" } })), {
    CI_TRIGGER_EVENT: "deploy",
    CI_TRIGGER_EVENT_ID: "evt-9",
  });
  assert.deepEqual(
    envelopeTriggerEnv(buildEnvelope({ id: "evt-3", type: "schedule.tick", payload: null, fields: { schedule: "nightly" } })),
    {
      CI_TRIGGER_EVENT: "schedule.tick",
      CI_TRIGGER_EVENT_ID: "evt-3",
      CI_TRIGGER_SCHEDULE: "nightly",
    },
  );
  assert.deepEqual(envelopeTriggerEnv(buildEnvelope({ id: "evt-4", type: "spawn", payload: null, fields: { parent: "run-7" } })), {
    CI_TRIGGER_EVENT: "spawn",
    CI_TRIGGER_EVENT_ID: "evt-4",
    CI_TRIGGER_PARENT: "run-7",
  });
});

void test("a handler's when reads type, key, payload and the push fields", () => {
  const vars = celEventVars(buildEnvelope(pushEvent));
  assert.deepEqual(Object.keys(vars.event).sort(), ["key", "paths", "paths_known", "payload", "ref", "repo", "sender", "sha", "type"]);
  const when = (source: string) => evaluatePredicate(compileCel(source), vars);
  assert.deepEqual(when('event.key == "octo/app" && event.ref == "refs/heads/main"'), { matched: true });
  assert.deepEqual(when('!event.paths_known || event.paths.exists(p, p.startsWith("docs/"))'), { matched: true });
  assert.deepEqual(when("event.payload.commits.size() == 1"), { matched: true });
});

void test("a pull request's when reads sha, head_ref and base_ref; a broadcast event has no key", () => {
  const envelope = buildEnvelope({
    id: "evt-5",
    type: "gh.pull_request.opened",
    key: "octo/app",
    payload: {},
    fields: { sha: "abc", head_ref: "feature", base_ref: "main", repo: "octo/app", sender: "mona", forge: "github" },
  });
  assert.deepEqual(
    evaluatePredicate(compileCel('event.base_ref == "main" && event.head_ref == "feature" && event.sha == "abc"'), celEventVars(envelope)),
    { matched: true },
  );
  const broadcast = celEventVars(buildEnvelope({ id: "evt-6", type: "deploy", payload: { n: 2 } }));
  assert.deepEqual(broadcast, { event: { type: "deploy", payload: { n: 2 } } });
  assert.equal(evaluatePredicate(compileCel('event.key == "o/r"'), broadcast).matched, false);
  assert.deepEqual(evaluatePredicate(compileCel('has(event.key) && event.key == "o/r"'), broadcast), { matched: false });
});
