/**
 * Test support: drives one speaker of the socket protocol through the transcript. Per case the
 * speaker runs as a real process (the `flow` client with the case's words, or an SDK driver
 * script) against a TranscriptPeer holding the case's frames; the test then checks that the peer
 * got exactly the recorded requests and that the speaker's outcome is the recorded one. A case
 * whose last answer is none (the run parks) expects the speaker still waiting: it is ended with
 * SIGTERM, as the agent ends a parked script.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";
import { test } from "node:test";
import { scratchPath, start, until } from "../client/client-test-kit.js";
import type { Ran, Started } from "../client/client-test-kit.js";
import type { IdRule } from "./transcript-peer.js";
import { TranscriptPeer } from "./transcript-peer.js";
import { isPending, loadTranscript } from "./transcript.js";
import type { TranscriptCase } from "./transcript.js";

export const transcript = loadTranscript();

export interface Speaker {
  readonly name: string;
  readonly ids: IdRule;
  /** The outcome the case expects of this speaker; undefined: the speaker has no such call. */
  expected(c: TranscriptCase): object | undefined;
  /** Starts the speaker on the case with FLOW_AGENT_SOCKET = socket, in cwd. */
  start(c: TranscriptCase, env: Record<string, string>, cwd: string): Started;
  /** What the speaker made of the answers, in the shape of the case's expectation. */
  outcome(ran: Ran, expected: object): unknown;
}

/** A fixed PATH: the cases need only sh and coreutils. */
const PATH = "/usr/local/bin:/usr/bin:/bin";

/** Longest a speaker may take on one case before the test ends it (a hang is a failure, not a wait). */
const CASE_LIMIT_MS = 30_000;

const describe = (ran: Ran): string =>
  `exit ${ran.code ?? ran.signal}\n--- stdout\n${ran.stdout.toString("utf8")}\n--- stderr\n${ran.stderr}`;

/** A parked call: the speaker must still be waiting once its last request arrived. */
const endParked = async (started: Started, peer: TranscriptPeer): Promise<Ran> => {
  await until(
    () => peer.finished || started.child.exitCode !== null || started.child.signalCode !== null,
    "the speaker's last request",
    CASE_LIMIT_MS,
  );
  peer.assertReplayed();
  const waiting = started.child.exitCode === null && started.child.signalCode === null && peer.open > 0;
  started.child.kill("SIGTERM");
  const ran = await started.done;
  assert.ok(
    waiting && ran.signal === "SIGTERM",
    `the speaker did not wait for the answer that never comes (the run parks); it ended on its own:\n${describe(ran)}`,
  );
  return ran;
};

const endAnswered = async (started: Started): Promise<Ran> => {
  const timer = setTimeout(() => started.child.kill("SIGKILL"), CASE_LIMIT_MS);
  try {
    return await started.done;
  } finally {
    clearTimeout(timer);
  }
};

const replayCase = async (speaker: Speaker, c: TranscriptCase, expected: object): Promise<void> => {
  const socket = scratchPath("agent.sock");
  const cwd = scratchPath("cwd");
  mkdirSync(cwd);
  for (const [name, text] of Object.entries(c.files ?? {})) writeFileSync(join(cwd, name), text);
  const peer = await TranscriptPeer.start(socket, c.frames, speaker.ids);
  try {
    const env = { PATH, FLOW_AGENT_SOCKET: socket, FLOW_AGENT_ID: "agt-transcript", FLOW_WORKFLOW_ID: "run-transcript" };
    const started = speaker.start(c, env, cwd);
    if (isPending(expected)) {
      await endParked(started, peer);
      return;
    }
    const ran = await endAnswered(started);
    peer.assertReplayed();
    assert.deepEqual(
      speaker.outcome(ran, expected),
      expected,
      `${speaker.name} made something else of the recorded answers:\n${describe(ran)}`,
    );
  } finally {
    await peer.close();
  }
};

/** One test per case the speaker has a call for. */
export const replayTranscript = (speaker: Speaker): void => {
  for (const c of transcript.cases) {
    const expected = speaker.expected(c);
    if (expected === undefined) continue;
    void test(`${speaker.name}: ${c.name}`, () => replayCase(speaker, c, expected));
  }
};

/** The SDK drivers print one line of JSON last; the outcome is that, with only the fields the case names. */
export const sdkOutcome = (ran: Ran, expected: object): unknown => {
  const lines = ran.stdout.toString("utf8").trimEnd().split("\n");
  let printed: Record<string, unknown>;
  try {
    printed = JSON.parse(lines.at(-1) ?? "") as Record<string, unknown>;
  } catch {
    return { driver: "printed no outcome", exit: ran.code };
  }
  const thrown = printed["throws"] as Record<string, unknown> | undefined;
  if (!thrown || !("throws" in expected)) return printed;
  const named = Object.keys(expected.throws as object);
  return { throws: Object.fromEntries(Object.entries(thrown).filter(([k]) => named.includes(k))) };
};

export const cliOutcome = (ran: Ran): unknown => ({ exit: ran.code, stdout: ran.stdout.toString("utf8"), stderr: ran.stderr });

export { start };
