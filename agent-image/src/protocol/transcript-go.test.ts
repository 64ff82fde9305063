/**
 * The protocol transcript (agent-image/protocol/transcript.json) replayed by the Go SDK
 * (agent-image/sdk/go) through its driver (agent-image/protocol/go), built once per run into the
 * build cache; each case runs the driver as a real process against a TranscriptPeer.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { repoRoot } from "../client/client-test-kit.js";
import { replayTranscript, sdkOutcome, start } from "./replay.js";
import { buildCache, requireToolchain } from "./toolchains.js";

const go = requireToolchain("go", process.env);

if (go.path === undefined) {
  void test("Go SDK: the transcript", { skip: go.skip }, () => undefined);
} else {
  const driver = join(buildCache(repoRoot, "go"), "sdk-driver");
  execFileSync(go.path, ["build", "-o", driver, "."], { cwd: join(repoRoot, "agent-image", "protocol", "go"), stdio: "inherit" });
  void test("Go SDK: its own tests (go test: durations, JSON as JSON.stringify writes it, refusals before sending)", () => {
    execFileSync(go.path, ["test", "-count=1", "."], { cwd: join(repoRoot, "agent-image", "sdk", "go"), stdio: "inherit" });
  });
  replayTranscript({
    name: "Go SDK",
    ids: "any-integer",
    expected: (c) => (c.sdk === undefined ? undefined : c.expect.sdk),
    start: (c, env, cwd) => start(driver, [JSON.stringify(c.sdk)], { env, cwd }),
    outcome: sdkOutcome,
  });
}
