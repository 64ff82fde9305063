/**
 * The protocol transcript itself: every op the agent serves has a case, and every case is one a
 * speaker can replay (well-formed frames; no answer only on the last frame, exactly where the case
 * expects the speaker to wait; an expectation for each kind of speaker that has the call).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createOpHandler } from "../socket-ops.js";
import type { OpContext } from "../socket-ops.js";
import { errorResponse } from "../socket-server.js";
import { isPending, loadTranscript, requestLine } from "./transcript.js";
import type { TranscriptCase } from "./transcript.js";

const transcript = loadTranscript();

/** The ops the agent serves, as its refusal of an unknown op lists them. */
const agentOps = async (): Promise<string[]> => {
  const ctx = { failure: () => undefined, onSuspend: () => undefined } as unknown as OpContext;
  const answer = (await createOpHandler(ctx)({ v: 2, op: "no-such-op" })).response as { error: { message: string } };
  const list = /\(socket protocol 2: ([^)]*)\)/.exec(answer.error.message)?.[1];
  assert.ok(list, answer.error.message);
  return list.split(", ");
};

const opOf = (line: string): string => (JSON.parse(line) as { op: string }).op;

void test("every op the agent serves has a case in the transcript", async () => {
  const ops = await agentOps();
  assert.ok(ops.includes("step") && ops.includes("state"), ops.join(" "));
  const covered = new Set(transcript.cases.flatMap((c) => c.frames.map((f) => opOf(requestLine(f)))));
  assert.deepEqual(
    ops.filter((op) => !covered.has(op)),
    [],
    "ops without a transcript case (add one: docs/internals.md, Protocol transcript)",
  );
  assert.deepEqual(
    [...covered].filter((op) => !ops.includes(op)),
    [],
    "transcript ops the agent does not serve",
  );
});

const checkCase = (c: TranscriptCase): void => {
  assert.ok(c.cli !== undefined || c.sdk !== undefined, "a case names a CLI call, an SDK call or both");
  assert.equal(c.expect.cli !== undefined, c.cli !== undefined, "an expectation for the CLI exactly when there is a CLI call");
  assert.equal(c.expect.sdk !== undefined, c.sdk !== undefined, "an expectation for the SDKs exactly when there is an SDK call");
  c.frames.forEach((f, i) => {
    const request = JSON.parse(requestLine(f)) as Record<string, unknown>;
    assert.equal(request["v"], 2, `request #${i} carries v 2`);
    assert.equal(typeof request["op"], "string", `request #${i} has an op`);
    assert.ok(f.answer === null || typeof f.answer["ok"] === "boolean", `answer #${i} says ok`);
    assert.ok(f.answer !== null || i === c.frames.length - 1, `only the last request may go unanswered (#${i})`);
  });
  const parks = c.frames.at(-1)?.answer === null;
  for (const expected of [c.expect.cli, c.expect.sdk]) {
    if (expected !== undefined)
      assert.equal(isPending(expected), parks, "a speaker is expected to wait exactly when the last answer never comes");
  }
};

void test("every case is well formed", () => {
  assert.equal(transcript.protocol, 2);
  const names = new Set<string>();
  for (const c of transcript.cases) {
    assert.ok(!names.has(c.name), `two cases are named ${c.name}`);
    names.add(c.name);
    try {
      checkCase(c);
    } catch (err) {
      assert.fail(`case "${c.name}": ${(err as Error).message}`);
    }
  }
});

void test("error answers and hello answers are the frames the agent's own builders make, key order included", async () => {
  const ctx = {
    agentId: "agt-transcript",
    captureIno: transcript.capture_ino,
    failure: () => undefined,
    onSuspend: () => undefined,
  } as unknown as OpContext;
  const hello = { v: 2, ...(await createOpHandler(ctx)({ v: 2, op: "hello" })).response };
  let errors = 0;
  for (const f of transcript.cases.flatMap((c) => c.frames)) {
    const answer = f.answer;
    if (answer === null || (answer["v"] === 2 && answer["ok"] === true && !("agent_id" in answer))) continue;
    if ("agent_id" in answer) {
      if (answer["protocol"] === 2) assert.equal(JSON.stringify(answer), JSON.stringify(hello));
      continue;
    }
    const { code, message } = answer["error"] as { code: string; message: string };
    assert.equal(JSON.stringify(answer), JSON.stringify({ v: 2, ...errorResponse(code, message, answer["exit"] as number) }));
    errors++;
  }
  assert.ok(errors >= 5, `the transcript has error answers (${errors})`);
});
