import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { fstatSync } from "node:fs";
import { lstat, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fifoStock, openCapturePipe } from "./capture-pipe.js";

let dir: string;
before(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), "fa-pipe-")));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

void test("a capture pipe from the FIFO stock is a fresh FIFO whose inode both ends share; a swapped stock entry is never used", async () => {
  const stock = fifoStock(join(dir, "fifos-1"));
  const pipe = openCapturePipe(join(dir, "one"), stock);
  assert.ok((await lstat(join(dir, "one"))).isFIFO());
  assert.equal(fstatSync(pipe.writeFd).ino, pipe.ino);
  pipe.closeWriteEnd();
  pipe.reader.destroy();
  const left = await readdir(join(dir, "fifos-1"));
  assert.equal(left.length, 31, "one mkfifo made 32");

  // Something of the agent's user replaced the stock (a file, a link to a file of ours): not taken.
  const target = join(dir, "target");
  await writeFile(target, "keep");
  for (const [i, name] of left.entries()) {
    await rm(join(dir, "fifos-1", name));
    if (i % 2) await writeFile(join(dir, "fifos-1", name), "x");
    else await symlink(target, join(dir, "fifos-1", name));
  }
  for (let i = 0; i < 3; i++) {
    const dest = join(dir, `next-${i}`);
    assert.equal(stock.take(dest), false);
    await assert.rejects(lstat(dest), { code: "ENOENT" }, "what was not a FIFO is removed, not left for the job");
    const p = openCapturePipe(dest, stock);
    assert.ok((await lstat(dest)).isFIFO(), "the job still gets a FIFO, made for it");
    p.closeWriteEnd();
    p.reader.destroy();
  }
  stock.dispose();
  await assert.rejects(readdir(join(dir, "fifos-1")), { code: "ENOENT" });
  assert.equal(await readFile(target, "utf8"), "keep", "a link in the stock reached nothing of ours");
});
