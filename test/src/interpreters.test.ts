/**
 * Interpreter defaults through the real server and agent (spec, Versioning: `.py` python3, `.ts`
 * bun run, `.js`/`.mjs` node, `.go` go run; `--interpreter` overrides, space-split), the durable Go
 * example (examples/go/durable.go) with the Go SDK, a Go determinism error, and a `.ts` script on an
 * agent without bun, which fails saying how to install it.
 *
 * bun comes from the test workspace's pinned devDependency `bun` (its npm package ships the
 * binary); it is linked into a directory of its own on the first server's PATH only. Go is Debian's
 * golang-go (.ci/run installs it): the agents' HOME gets the SDK at ~/go/src/flowsvc.dev/sdk and
 * `GO111MODULE=auto` in Go's env file, as agent-image/sdk/go/README.md tells a user to.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { copyFile, cp, link, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { delimiter, dirname, join } from "node:path";
import { REPO_ROOT, startTestServer } from "./support/server.js";
import type { TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { FOLLOW_TIMEOUT, count, ok, runIdIn } from "./support/runs.js";
import { agentHome, assertDurableExample } from "./support/sdk-examples.js";

const PATH_DIRS = (process.env["PATH"] ?? "").split(delimiter).filter((d) => d !== "");
/** The test's PATH without any directory that has a bun (npm run puts node_modules/.bin first). */
const NO_BUN_PATH = [dirname(process.execPath), ...PATH_DIRS.filter((d) => !existsSync(join(d, "bun")))].join(delimiter);
const GO_ON_PATH = NO_BUN_PATH.split(delimiter).some((d) => existsSync(join(d, "go")));
const NO_GO = GO_ON_PATH ? undefined : "go is not installed (apt-get install golang-go; .ci/run installs it)";
if (NO_GO && process.env["CI"]) throw new Error(`${NO_GO}: the Go tests must run in CI`);

/** The bun binary of the npm package `bun` (a devDependency of this workspace). */
const bunBinary = (): string => join(dirname(createRequire(import.meta.url).resolve("bun/package.json")), "bin", "bun.exe");

/** A hard link (or copy) of `file` in `dir`: the agents' user may not read the checkout. */
const place = async (file: string, dir: string, name: string): Promise<void> => {
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await link(file, join(dir, name)).catch(() => copyFile(file, join(dir, name)));
};

/** The Go SDK where `go run` finds it in GOPATH mode (GO111MODULE=auto outside a module). */
const installGoSdk = async (home: string): Promise<void> => {
  const sdk = join(home, "go", "src", "flowsvc.dev", "sdk");
  await mkdir(dirname(sdk), { recursive: true, mode: 0o755 });
  await cp(join(REPO_ROOT, "agent-image", "sdk", "go"), sdk, { recursive: true });
  await mkdir(join(home, ".config", "go"), { recursive: true, mode: 0o755 });
  await writeFile(join(home, ".config", "go", "env"), "GO111MODULE=auto\n");
};

const SCRIPTS: ReadonlyArray<{ file: string; source: string; prints: string }> = [
  { file: "which.py", source: 'import sys\nprint("py", sys.version_info[0])\n', prints: "py 3" },
  { file: "which.js", source: 'console.log("js", typeof process.versions.node, typeof globalThis.Bun);\n', prints: "js string undefined" },
  {
    file: "which.mjs",
    source: 'import { argv } from "node:process";\nconsole.log("mjs", typeof argv[1], typeof globalThis.Bun);\n',
    prints: "mjs string undefined",
  },
  { file: "which.ts", source: 'const n: number = 2;\nconsole.log("ts", typeof Bun, n);\n', prints: "ts object 2" },
  {
    file: "which.go",
    source: 'package main\n\nimport (\n\t"fmt"\n\t"runtime"\n)\n\nfunc main() { fmt.Println("go", runtime.Compiler) }\n',
    prints: "go gc",
  },
];

const DETERMINISM_GO = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	flowsvc "flowsvc.dev/sdk"
)

func main() {
	ctx := context.Background()
	_, seen, err := flowsvc.StateGet(ctx, "seen")
	if err == nil {
		err = flowsvc.StateSet(ctx, "seen", true)
	}
	name := "first"
	if seen {
		name = "second"
	}
	if err == nil {
		_, err = flowsvc.Step(ctx, name, []string{"true"})
	}
	if errors.Is(err, flowsvc.ErrDeterminism) {
		fmt.Println("determinism:", err)
		os.Exit(3)
	}
	if err == nil {
		err = flowsvc.Sleep(ctx, time.Second)
	}
	fmt.Println("ended with", err)
}
`;

void describe("interpreters", () => {
  let dir: string;
  let withBun: TestServer;
  let withoutBun: TestServer;

  before(async () => {
    dir = await scriptDir("flowsvc-interpreters-");
    await place(bunBinary(), join(dir, "bun-bin"), "bun");
    const home = join(dir, "home");
    await mkdir(home, { mode: 0o755 });
    // A lease a loaded host's pauses cannot lapse: no pass runs twice by accident.
    [withBun, withoutBun] = await Promise.all([
      startTestServer({
        agents: 3,
        leaseMs: 5000,
        env: { PATH: `${join(dir, "bun-bin")}${delimiter}${NO_BUN_PATH}`, HOME: home, XDG_CONFIG_HOME: undefined },
      }),
      startTestServer({ agents: 1, env: { PATH: NO_BUN_PATH, HOME: home } }),
    ]);
    if (!NO_GO) await installGoSdk(agentHome(withBun, home));
  });

  after(async () => {
    await Promise.all([withBun?.stop(), withoutBun?.stop()]);
    await rm(dir, { recursive: true, force: true });
  });

  const submit = async (server: TestServer, file: string, source: string, ...args: string[]) => {
    const path = join(dir, file);
    await writeFile(path, source);
    return server.cli(["submit", path, ...args, "--follow"], FOLLOW_TIMEOUT);
  };

  void test("each extension of the spec's table runs under its runtime: .py python3, .js/.mjs node, .ts bun run, .go go run", async () => {
    const runs = SCRIPTS.filter((s) => !(NO_GO && s.file.endsWith(".go")));
    // Submitted together, followed one after the other: each follow's time limit starts when the
    // earlier ones are done, so a loaded host that queues the runs does not fail the test.
    const ids = await Promise.all(
      runs.map(async (s) => {
        await writeFile(join(dir, s.file), s.source);
        return runIdIn(ok(await withBun.cli(["submit", join(dir, s.file)], FOLLOW_TIMEOUT)).stdout);
      }),
    );
    for (const [i, s] of runs.entries()) {
      const r = await withBun.cli(["follow", ids[i]!], FOLLOW_TIMEOUT);
      assert.equal(r.code, 0, `${s.file}: ${r.stdout}${r.stderr}`);
      assert.ok(r.stdout.includes(s.prints), `${s.file} printed:\n${r.stdout}${r.stderr}`);
    }
  });

  void test("--interpreter overrides the extension and is split on whitespace", async () => {
    const source = "import sys\nprint('flags', sys.flags.no_site, sys.flags.isolated, sys.argv[0].endswith('flags.sh'))\n";
    const r = await submit(withBun, "flags.sh", source, "--interpreter", "  python3\t-S   -I ");
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.ok(r.stdout.includes("flags 1 1 True"), r.stdout + r.stderr);
  });

  void test("a .ts script on an agent without bun fails, saying how to install it", async () => {
    const r = await submit(withoutBun, "nobun.ts", 'console.log("must not run");\n');
    assert.notEqual(r.code, 0, r.stdout + r.stderr);
    const out = r.stdout + r.stderr;
    assert.ok(!out.includes("must not run"), out);
    assert.match(out, /cannot start "bun": spawn bun (ENOENT|EACCES)/);
    assert.match(out, /npm install -g bun` \(the npm package bun ships the binary\)/);
  });

  void test("the durable Go example: steps run once across a sleep, a bounded wait times out to ok=false", { skip: NO_GO }, async () => {
    const source = await readFile(join(REPO_ROOT, "examples", "go", "durable.go"), "utf8");
    assertDurableExample(await submit(withBun, "durable.go", source), "[eu us]");
  });

  void test(
    "Go: a replay that reaches a different step than recorded fails the run with the determinism error",
    { skip: NO_GO },
    async () => {
      const r = await submit(withBun, "determinism.go", DETERMINISM_GO);
      assert.notEqual(r.code, 0, r.stdout + r.stderr);
      assert.match(
        r.stderr,
        /failed: determinism error at call #0: the journal recorded step "first"#0 but the script called step "second"#0/,
      );
      assert.equal(count(r.stdout + r.stderr, "ended with"), 0, "the second pass did not go past the step");
    },
  );
});
