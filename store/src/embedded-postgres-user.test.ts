/**
 * The embedded launcher as a normal user (the rest of the suite runs as root in CI): when the
 * tests run as root, a child Node process runs it as `nobody` on a data dir that user owns.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { accessSync, chownSync, constants, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const launcher = join(dirname(fileURLToPath(import.meta.url)), "embedded-postgres.js");

/** Every directory above the checkout must let other users through, or `nobody` cannot load it. */
const readableByOthers = (path: string): boolean => {
  for (let p = path; p !== dirname(p); p = dirname(p)) if ((statSync(p).mode & 0o001) === 0) return false;
  return true;
};

void test("as a normal user the embedded Postgres starts, keeps its data owned by that user, and stops", (t) => {
  if (process.getuid?.() !== 0) {
    t.skip("the suite runs as a normal user already: every other embedded Postgres test covers this path");
    return;
  }
  if (!readableByOthers(dirname(launcher))) {
    t.skip(`the checkout (${dirname(launcher)}) is not readable by other users, so nobody cannot load it`);
    return;
  }
  accessSync("/usr/sbin/runuser", constants.X_OK);
  const home = mkdtempSync(join(tmpdir(), "flowsvc-user-pg-"));
  chownSync(home, 65534, 65534);
  try {
    const script = `import(${JSON.stringify(launcher)}).then(async (m) => {
      const pg = await m.startEmbeddedPostgres({ dataDir: ${JSON.stringify(join(home, "data"))} });
      process.stdout.write("uid " + process.getuid() + " up\\n");
      await pg.stop();
      process.stdout.write("stopped\\n");
    }).catch((e) => { console.error(e.message); process.exit(1); });`;
    const r = spawnSync("/usr/sbin/runuser", ["-u", "nobody", "--", process.execPath, "-e", script], {
      encoding: "utf8",
      env: { PATH: process.env["PATH"], HOME: home },
      timeout: 120_000,
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /uid 65534 up\nstopped/);
    assert.equal(statSync(join(home, "data", "pg")).uid, 65534);
    const left = spawnSync("pgrep", ["-f", join(home, "data")], { encoding: "utf8" });
    assert.equal(left.stdout.trim(), "", "no postgres left after stop");
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});
