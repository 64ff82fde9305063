/**
 * Agent pools of `flow server`: the default local agents advertise `polyglot` (they run scripts
 * with this machine's runtimes), so a fresh server runs script handlers; a job that needs a
 * capability no pool advertises is not silent: the server warns on stderr, naming it and the flag
 * that starts such agents. Through the real server, Postgres, `flow` and agents.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { handlerRunId } from "@flowsvc/store";
import { startTestServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";
import { scriptDir } from "./support/script-dir.js";

let server: TestServer;
let dir: string;

before(async () => {
  server = await startTestServer({ agents: 2 }); // no --agent-pool: the defaults only
  dir = await scriptDir("flowsvc-pools-test-");
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const runStatus = async (id: string): Promise<string> => {
  const res = await fetch(`${server.url}/api/v1/orgs/default/projects/default/runs/${id}`, {
    headers: { authorization: `Bearer ${server.token}` },
  });
  return ((await res.json()) as { status: string }).status;
};

void test("a server started without --agent-pool runs a script handler: its default agents advertise polyglot", async () => {
  const handler = join(dir, "h.sh");
  await writeFile(handler, "echo handled $CI_TRIGGER_EVENT_ID\n");
  const set = await server.cli(["handler", "set", "h", handler, "--on", "pools.ping"]);
  assert.equal(set.code, 0, set.stderr);
  const emit = await server.cli(["emit", "pools.ping"]);
  assert.equal(emit.code, 0, emit.stderr);
  const runId = handlerRunId(emit.stdout.trim(), "h");
  let status = "";
  await waitFor("the handler run to end", async () => ["succeeded", "failed"].includes((status = await runStatus(runId))));
  assert.equal(status, "succeeded");
});

void test("a job that needs a capability no agent pool advertises makes the server warn, naming it and the flag", async () => {
  const file = join(dir, "gpu.sh");
  await writeFile(file, "flow activity train --requires gpu -- echo trained\n");
  const r = await server.cli(["submit", file]);
  assert.equal(r.code, 0, r.stderr);
  const runId = r.stdout.trim();
  const warning = (): string | undefined =>
    server
      .output()
      .split("\n")
      .find((l) => l.includes("capabilities gpu"));
  await waitFor("the warning", () => warning() !== undefined);
  assert.match(warning()!, /no agent pool of this server advertises; start one with --agent-pool gpu:<n>/);
  assert.equal(await runStatus(runId), "parked", "the run waits for its activity, which waits for an agent");
  assert.equal((await server.cli(["cancel", runId])).code, 0);
});
