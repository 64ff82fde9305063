// An "external" Postgres for the FLOWSVC_DATABASE_URL path: Debian's PostgreSQL 15 server, not the
// bundled one, so a test proves flowsvc works against a server it did not start and of another
// major version. Same launcher as the embedded cluster (unprivileged user when root, 127.0.0.1
// only, a free port), pointed at Debian's binaries, in a fresh temp dir removed on stop().
import { existsSync, mkdtempSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startEmbeddedPostgres } from "@flowsvc/store";

export const DEBIAN_POSTGRES_BIN = "/usr/lib/postgresql/15/bin";

export type DebianPostgres = { url: string; stop(): Promise<void> };

export async function startDebianPostgres(opts: { log?: (msg: string) => void } = {}): Promise<DebianPostgres> {
  for (const bin of ["initdb", "postgres"]) {
    if (!existsSync(join(DEBIAN_POSTGRES_BIN, bin))) {
      throw new Error(
        `Debian's PostgreSQL 15 server is not installed (no ${join(DEBIAN_POSTGRES_BIN, bin)}): apt-get install postgresql-15`,
      );
    }
  }
  const dataDir = mkdtempSync(join(tmpdir(), "flowsvc-debian-pg-"));
  try {
    const server = await startEmbeddedPostgres({ dataDir, binDir: DEBIAN_POSTGRES_BIN, durable: false, ...opts });
    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        await server.stop();
        await rm(dataDir, { recursive: true, force: true });
      })());
    return { url: server.url, stop };
  } catch (err) {
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
}
