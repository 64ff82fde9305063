import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmod, mkdtemp, readFile, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ensureSystemUser } from "@flowsvc/store";
import { copyAgentRuntime, type AgentPaths } from "./agent-runtime.js";

const agentIndex = fileURLToPath(import.meta.resolve("@flowsvc/agent"));
const agentRoot = dirname(dirname(agentIndex));
const paths: AgentPaths = { agentMain: join(agentRoot, "dist", "main.js"), agentIndex, clientDir: join(agentRoot, "bin") };
const asRoot = process.getuid?.() === 0;

void test(
  "the agent's runtime copy loads as an unprivileged user on its own, names no file of the checkout, and is made once per build",
  { skip: asRoot ? false : "only root can run a child as another user" },
  async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "flowsvc-runtime-"));
    await chmod(dataDir, 0o701); // as the server opens its data dir: others pass through, cannot list
    try {
      const logs: string[] = [];
      const copied = await copyAgentRuntime(paths, dataDir, (m) => logs.push(m));
      assert.ok(copied.agentIndex.startsWith(join(dataDir, "agent-runtime")), copied.agentIndex);
      assert.equal(logs.length, 1, "one copy made");
      // The in-script client's Node shim names the agent file by path: the copy's, never the checkout's.
      for (const shim of ["bin/flow", "bin-node/flow"]) {
        const file = join(dirname(dirname(copied.agentIndex)), shim);
        const text = await readFile(file, "utf8").catch(() => "");
        if (text.startsWith("#!")) assert.ok(!text.includes(`${agentRoot}/`), `${shim} still names the checkout: ${text}`);
        assert.equal((await stat(file)).mode & 0o005, 0o005, `${shim} is readable and runnable by others`);
      }
      // As the agent user, with the checkout out of the module path: every import resolves in the copy.
      const user = ensureSystemUser("flowsvc-agent", "local agents");
      const probe = `const m = await import(${JSON.stringify(pathToFileURL(copied.agentIndex).href)}); console.log(typeof m.runJob === "function" || Object.keys(m).length > 0);`;
      const r = spawnSync(process.execPath, ["--input-type=module", "-e", probe], {
        uid: user.uid,
        gid: user.gid,
        cwd: "/",
        encoding: "utf8",
        env: { PATH: "/usr/bin:/bin" },
      });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout.trim(), "true");
      // The same build again: the copy is reused, not made twice.
      const again = await copyAgentRuntime(paths, dataDir, (m) => logs.push(m));
      assert.deepEqual(again, copied);
      assert.equal(logs.length, 1, "the second start reused the copy");
      assert.equal((await readdir(join(dataDir, "agent-runtime"))).length, 1, "no scratch copy left behind");
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  },
);
