/**
 * The protocol transcript (agent-image/protocol/transcript.json) replayed by the Rust SDK
 * (agent-image/sdk/rust) through its driver (agent-image/protocol/rust), built once per run into the
 * build cache (cargo's target dir there makes a second run's build a no-op); each case runs the
 * driver as a real process against a TranscriptPeer.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { repoRoot } from "../client/client-test-kit.js";
import { replayTranscript, sdkOutcome, start } from "./replay.js";
import { buildCache, requireToolchain } from "./toolchains.js";

const cargo = requireToolchain("cargo", process.env);

if (cargo.path === undefined) {
  void test("Rust SDK: the transcript", { skip: cargo.skip }, () => undefined);
} else {
  const target = buildCache(repoRoot, "cargo-target");
  const manifest = join(repoRoot, "agent-image", "protocol", "rust", "Cargo.toml");
  execFileSync(cargo.path, ["build", "--quiet", "--offline", "--manifest-path", manifest, "--target-dir", target], { stdio: "inherit" });
  const driver = join(target, "debug", "flowsvc-sdk-driver");
  void test("Rust SDK: its own tests (cargo test: JSON with hostile input, base64, durations, refusals before sending)", () => {
    const sdk = join(repoRoot, "agent-image", "sdk", "rust", "Cargo.toml");
    execFileSync(cargo.path, ["test", "--quiet", "--offline", "--manifest-path", sdk, "--target-dir", target], { stdio: "inherit" });
  });
  replayTranscript({
    name: "Rust SDK",
    ids: "any-integer",
    expected: (c) => (c.sdk === undefined ? undefined : c.expect.sdk),
    start: (c, env, cwd) => start(driver, [JSON.stringify(c.sdk)], { env, cwd }),
    outcome: sdkOutcome,
  });
}
