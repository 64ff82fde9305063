import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createPool, listMigrations, migrate } from "@flowsvc/store";
import { DEBIAN_POSTGRES_BIN, startDebianPostgres } from "./debian-postgres.js";

/** Live (not zombie) processes with their argv. */
function liveProcesses(): { pid: number; argv: string[] }[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .flatMap((n) => {
      try {
        const stat = readFileSync(`/proc/${n}/stat`, "utf8");
        if (stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z") return [];
        return [{ pid: Number(n), argv: readFileSync(`/proc/${n}/cmdline`, "utf8").split("\0") }];
      } catch {
        return [];
      }
    });
}

test("flowsvc migrates a Debian PostgreSQL 15 server it did not start, and migrating again is a no-op", async (t) => {
  const server = await startDebianPostgres();
  t.after(() => server.stop());
  const pool = createPool(server.url, { max: 2 });
  t.after(() => pool.end());

  const { rows } = await pool.query<{ v: string }>("select current_setting('server_version_num') as v");
  assert.match(rows[0]?.v ?? "", /^15\d{4}$/);
  const names = (await listMigrations()).map((m) => m.name);
  assert.deepEqual(await migrate(pool), { applied: names });
  assert.deepEqual(await migrate(pool), { applied: [] });
  assert.deepEqual((await pool.query("select count(*)::int as n from runs")).rows, [{ n: 0 }]);
});

test("stop leaves no Debian postgres process and removes its data dir", async () => {
  const server = await startDebianPostgres();
  const port = new URL(server.url).port;
  const postmaster = liveProcesses().find((p) => p.argv[0] === join(DEBIAN_POSTGRES_BIN, "postgres") && p.argv.includes(port));
  assert.ok(postmaster, "Debian's postgres serves the URL");
  const pgDir = postmaster.argv[postmaster.argv.indexOf("-D") + 1] ?? "";
  assert.match(pgDir, /flowsvc-debian-pg-/);

  await server.stop();
  assert.deepEqual(
    liveProcesses().filter((p) => p.argv.some((a) => a.includes(pgDir))),
    [],
  );
  assert.equal(existsSync(dirname(pgDir)), false);
});
