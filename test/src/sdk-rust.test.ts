/**
 * The durable Rust example (examples/rust) through the real server and agent: the crate is built
 * once (cargo's target dir under .cache/sdk-build is kept between runs, so a second run's build is
 * a no-op), its binary placed where examples/rust/durable.sh runs it (the agents' HOME), and
 * durable.sh submitted as is. The Rust SDK's protocol is checked call by call by the transcript
 * (agent-image/src/protocol/transcript-rust.test.ts); this is the one end-to-end path.
 */
import { after, before, test } from "node:test";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, copyFile, mkdir, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { REPO_ROOT, startTestServer } from "./support/server.js";
import type { TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { FOLLOW_TIMEOUT } from "./support/runs.js";
import { agentHome, assertDurableExample } from "./support/sdk-examples.js";

/** cargo on PATH, else where rustup puts it (~/.cargo/bin is not on every PATH). */
const CARGO = [...(process.env["PATH"] ?? "").split(delimiter), join(homedir(), ".cargo", "bin")]
  .filter((d) => d !== "")
  .map((d) => join(d, "cargo"))
  .find((f) => existsSync(f));
const NO_CARGO = CARGO ? undefined : "cargo is not installed (apt-get install cargo; .ci/run installs it)";
if (NO_CARGO && process.env["CI"]) throw new Error(`${NO_CARGO}: the Rust tests must run in CI`);

let dir: string;
let server: TestServer;
let home: string;

before(async () => {
  if (NO_CARGO) return;
  const target = join(REPO_ROOT, ".cache", "sdk-build", "cargo-target");
  const manifest = join(REPO_ROOT, "examples", "rust", "Cargo.toml");
  execFileSync(CARGO!, ["build", "--quiet", "--offline", "--manifest-path", manifest, "--target-dir", target], { stdio: "inherit" });
  dir = await scriptDir("flowsvc-sdk-rust-");
  home = join(dir, "home");
  await mkdir(home, { mode: 0o755 });
  // A lease a loaded host's pauses cannot lapse: no pass runs twice by accident.
  server = await startTestServer({ agents: 1, leaseMs: 5000, env: { HOME: home } });
  const bin = join(agentHome(server, home), "flowsvc-examples");
  await mkdir(bin, { recursive: true, mode: 0o755 });
  await copyFile(join(target, "debug", "flowsvc-durable-example"), join(bin, "flowsvc-durable-example"));
  await chmod(join(bin, "flowsvc-durable-example"), 0o755);
});

after(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

void test("the durable Rust example: steps run once across a sleep, a bounded wait times out to None", { skip: NO_CARGO }, async () => {
  const r = await server.cli(["submit", join(REPO_ROOT, "examples", "rust", "durable.sh"), "--follow"], FOLLOW_TIMEOUT);
  assertDurableExample(r, '["eu","us"]');
});
