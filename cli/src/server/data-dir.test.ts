import assert from "node:assert/strict";
import { chmod, mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { makeDataDir } from "./data-dir.js";

const modeOf = async (path: string): Promise<string> => ((await stat(path)).mode & 0o777).toString(8);

void test("a data dir under missing parents: the parents are made passable (0755), the data dir 0700; existing ones keep their mode", async () => {
  const root = await mkdtemp(join(tmpdir(), "flow-data-dir-"));
  const mask = process.umask(0o022);
  try {
    const dataDir = join(root, "a", "b", "data");
    await makeDataDir(dataDir);
    assert.deepEqual(await Promise.all([join(root, "a"), join(root, "a", "b"), dataDir].map(modeOf)), ["755", "755", "700"]);
    await chmod(join(root, "a", "b"), 0o711);
    await chmod(dataDir, 0o701);
    await makeDataDir(dataDir);
    assert.deepEqual(await Promise.all([join(root, "a", "b"), dataDir].map(modeOf)), ["711", "701"]);
  } finally {
    process.umask(mask);
    await rm(root, { recursive: true, force: true });
  }
});
