/**
 * Output of calls that parked the run (issue 14, items 4 and 10), end to end through the real
 * server, CLI, agent and in-script client:
 * - a result that arrived while the run was parked (an activity's stdout, a wait-event envelope,
 *   a wait-signal payload, an activity-collect) is in the run's log once: on the pass that
 *   receives it, and not again on later passes;
 * - half a secret, a pause, then the rest (on the same stream or on the other one) shows only
 *   `***` in `flow follow` and in the stored log, never a prefix of the secret.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { startTestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";
import { count, ok, RUN_ID, runKit } from "./support/runs.js";
import type { TestServer } from "./support/server.js";

const SECRET = "Tr0ub4dor-horse-battery-staple";

let server: TestServer;
let dir: string;

before(async () => {
  server = await startTestServer({ leaseMs: 3000, agents: 4 });
  dir = await mkdtemp(join(tmpdir(), "flowsvc-parked-output-"));
  await chmod(dir, 0o777); // local agents may run as another user
  assert.equal((await server.cli(["secret", "set", "PASSPHRASE", SECRET])).code, 0);
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const { start, parked } = runKit(
  () => server,
  () => dir,
);

void test("a result that arrived while the run was parked is in the log once, on the pass that receives it", async () => {
  const run = await start(
    "parked.sh",
    `
flow activity greet -- echo hello-from-activity
flow sleep 0s
flow activity-submit later -- echo collected-later
flow activity-collect later
flow wait-event parked.output.test --timeout 60s
flow sleep 1s
flow wait-signal go --timeout 60s
flow sleep 1s
v=$(flow activity quiet -- echo captured-value)
echo "captured=$v"
flow sleep 1s
echo end
`,
  );
  await waitFor(
    "the run to park on its event wait",
    parked(run, (n) => n.startsWith("event:")),
    60_000,
  );
  const event = ok(await server.cli(["emit", "parked.output.test", "--payload", '{"marker":"envelope-marker"}'])).stdout.trim();
  await waitFor(
    "the run to park on the signal",
    parked(run, (n) => n === "go"),
    60_000,
  );
  ok(await server.cli(["signal", run, "go", "--payload", '{"marker":"signal-marker"}']));
  const r = await server.cli(["follow", run], { timeoutMs: 90_000 });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const log = r.stdout;
  assert.equal(count(log, "hello-from-activity"), 1, log);
  assert.equal(count(log, "collected-later"), 1, log);
  assert.equal(count(log, event), 1, log);
  assert.equal(count(log, "envelope-marker"), 1, log);
  assert.equal(count(log, "signal-marker"), 1, log);
  // A result captured with $(...) is the script's to print: only its echo shows it (a plain echo
  // runs again on every later pass, as the whole script does).
  assert.ok(count(log, "captured=captured-value") >= 1, log);
  assert.equal(count(log, "captured-value"), count(log, "captured=captured-value"), log);
  assert.equal(count(log, "end\n"), 1, log);
  // The order the script printed them in.
  const order = ["hello-from-activity", "collected-later", "envelope-marker", "signal-marker", "captured=", "end"].map((p) =>
    log.indexOf(p),
  );
  assert.deepEqual(
    [...order].sort((a, b) => a - b),
    order,
    log,
  );
});

void test("half a secret, a pause, then the rest: only *** in flow follow and in the stored log, on one stream or across both", async () => {
  const file = join(dir, "pause.sh");
  await writeFile(
    file,
    `
gate() { : > "$DIR/$1.half"; while [ ! -e "$DIR/$1.go" ]; do sleep 0.05; done; }
printf 'same: %s' "\${PASSPHRASE:0:11}"; gate one; printf '%s\\n' "\${PASSPHRASE:11}"
printf 'split: %s' "\${PASSPHRASE:0:9}"; gate two; printf '%s\\n' "\${PASSPHRASE:9}" >&2
printf 'back: %s' "\${PASSPHRASE:0:6}" >&2; gate three; printf '%s\\n' "\${PASSPHRASE:6}"
printf 'last: %s' "\${PASSPHRASE:0:8}"
`,
  );
  const live = server.cli(["submit", file, "--follow", "--env", `DIR=${dir}`], { timeoutMs: 90_000 });
  for (const gate of ["one", "two", "three"]) {
    await waitFor(
      `the script to print half the secret (${gate})`,
      () =>
        readFile(join(dir, `${gate}.half`)).then(
          () => true,
          () => false,
        ),
      60_000,
    );
    // The pause of the issue: longer than the idle flush the agent used to have (1 s).
    await sleep(1500);
    await writeFile(join(dir, `${gate}.go`), "");
  }
  const followed = await live;
  assert.equal(followed.code, 0, followed.stdout + followed.stderr);
  const run = RUN_ID.exec(followed.stderr + followed.stdout)?.[0];
  assert.ok(run, followed.stderr);
  const stored = await server.cli(["follow", run]);
  assert.equal(stored.code, 0, stored.stderr);
  for (const [what, text] of [
    ["live", followed.stdout],
    ["stored", stored.stdout],
  ] as const) {
    assert.ok(!text.includes(SECRET.slice(0, 4)), `${what} log shows a prefix of the secret:\n${text}`);
    for (const part of ["horse", "battery", "staple"]) assert.ok(!text.includes(part), `${what} log shows "${part}":\n${text}`);
    for (const label of ["same", "split", "back", "last"]) assert.match(text, new RegExp(`${label}: \\*\\*\\*`), `${what}:\n${text}`);
  }
});
