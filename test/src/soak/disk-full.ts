/**
 * The soak's disk-full scenario (issue 15, item 4): a `flow server` whose data dir (and so its
 * embedded Postgres) is on a small tmpfs. Work is acknowledged, the filesystem is filled, new work
 * must be refused with a clear error, and once space is freed everything acknowledged before must
 * still be there and new work must succeed. Mounting needs root (CAP_SYS_ADMIN): where the host
 * refuses, the scenario is skipped and says so.
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, openSync, writeSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestServer, type TestServer } from "../support/server.js";
import { waitFor } from "../support/wait.js";

export interface DiskFullFigures {
  skipped?: string;
  /** What each request answered while the disk was full: `POST /runs -> 503 <message>`. */
  whileFull: string[];
  /** Requests answered 2xx while the disk was full (each must still hold after space is freed). */
  acceptedWhileFull: number;
  /** Runs acknowledged before or during the fill that were not `succeeded` at the end, and events acknowledged then that are gone. */
  lost: number;
  /** Whether the server took and finished new work after space was freed. */
  recovered: boolean;
  details: string[];
}

const BASE = "/api/v1/orgs/default/projects/default";
const SIZE_MB = 320;

interface Call {
  status: number;
  text: string;
}

const call = async (server: TestServer, method: string, path: string, body?: unknown): Promise<Call> => {
  try {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    return { status: res.status, text: await res.text() };
  } catch (err) {
    return { status: 0, text: (err as Error).message };
  }
};

const submit = (server: TestServer): Promise<Call> =>
  call(server, "POST", `${BASE}/runs`, { kind: "script", source: "echo disk\n", filename: "disk.sh", idempotency_key: randomUUID() });

const statusOf = async (server: TestServer, id: string): Promise<string> => {
  const r = await call(server, "GET", `${BASE}/runs/${id}`);
  return r.status === 200 ? (JSON.parse(r.text) as { status: string }).status : `http ${r.status}`;
};

/** Writes a file until the filesystem says ENOSPC. */
const fill = (path: string): void => {
  const fd = openSync(path, "w");
  const chunk = Buffer.alloc(1024 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
  } finally {
    closeSync(fd);
  }
};

const mount = (dir: string): string | undefined => {
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${SIZE_MB}m,mode=0755`, "tmpfs", dir], { encoding: "utf8" });
  return r.status === 0
    ? undefined
    : `could not mount a ${SIZE_MB} MB tmpfs (${(r.stderr || r.error?.message || "").trim()}): needs root with CAP_SYS_ADMIN`;
};

const succeededAll = async (server: TestServer, ids: string[]): Promise<boolean> =>
  (await Promise.all(ids.map((id) => statusOf(server, id)))).every((s) => s === "succeeded");

/** New work while the disk is full: each answer is kept; a run acknowledged anyway must still succeed later. */
const tryWhileFull = async (server: TestServer, figures: DiskFullFigures, acked: string[], events: string[]): Promise<void> => {
  // Postgres writes into WAL segments it already allocated: small writes still fit on a full disk.
  // Large emits (1.5 MB each) use those up; the first refusal is the one a user would see.
  const big = "x".repeat(1536 * 1024);
  for (let i = 0; i < 60; i++) {
    const r = await call(server, "POST", `${BASE}/events`, { type: "disk.full", payload: { i, big } });
    if (r.status === 201) {
      figures.acceptedWhileFull++;
      events.push((JSON.parse(r.text) as { id: string }).id);
      continue;
    }
    figures.whileFull.push(`POST /events (emit ${i + 1}, 1.5 MB) -> ${r.status} ${r.text.slice(0, 300)}`);
    break;
  }
  const r = await submit(server);
  figures.whileFull.push(`POST /runs -> ${r.status} ${r.text.slice(0, 300)}`);
  if (r.status === 201) {
    figures.acceptedWhileFull++;
    acked.push((JSON.parse(r.text) as { id: string }).id);
  }
};

/** The scenario; never throws for what it finds, only counts it. */
export const runDiskFull = async (log: (line: string) => void = () => undefined): Promise<DiskFullFigures> => {
  const dir = await mkdtemp(join(tmpdir(), "flowsvc-diskfull-"));
  const skipped = mount(dir);
  if (skipped) {
    await rm(dir, { recursive: true, force: true });
    return { skipped, whileFull: [], acceptedWhileFull: 0, lost: 0, recovered: false, details: [] };
  }
  const server = await startTestServer({ embedded: true, agents: 2, dataDirParent: dir });
  const figures: DiskFullFigures = { whileFull: [], acceptedWhileFull: 0, lost: 0, recovered: false, details: [] };
  try {
    const acked: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await submit(server);
      if (r.status === 201) acked.push((JSON.parse(r.text) as { id: string }).id);
    }
    await waitFor("the first runs to succeed", () => succeededAll(server, acked), 120_000);
    log(`disk: ${acked.length} runs done; filling the filesystem`);
    const filler = join(dir, "filler");
    fill(filler);
    const events: string[] = [];
    await tryWhileFull(server, figures, acked, events);
    log(`disk: while full: ${figures.whileFull.join(" | ")}`);
    await rm(filler, { force: true });
    const after = await submit(server);
    const afterId = after.status === 201 ? (JSON.parse(after.text) as { id: string }).id : undefined;
    figures.recovered = afterId !== undefined;
    if (afterId) {
      await waitFor("a run after space was freed", async () => (await statusOf(server, afterId)) === "succeeded", 120_000).catch(() => {
        figures.recovered = false;
      });
    } else figures.details.push(`submit after freeing space -> ${after.status} ${after.text.slice(0, 300)}`);
    await waitFor("everything acknowledged to succeed", () => succeededAll(server, acked), 120_000).catch(() => undefined);
    for (const id of events) {
      const e = await call(server, "GET", `${BASE}/events/${id}`);
      if (e.status === 200) continue;
      figures.lost++;
      figures.details.push(`event ${id} acknowledged while the disk was full, now ${e.status}`);
    }
    for (const id of acked) {
      const s = await statusOf(server, id);
      if (s === "succeeded") continue;
      figures.lost++;
      figures.details.push(`run ${id} acknowledged, now ${s}`);
    }
    return figures;
  } finally {
    await server.stop().catch(() => undefined);
    spawnSync("umount", ["-l", dir]);
    await rm(dir, { recursive: true, force: true });
  }
};
