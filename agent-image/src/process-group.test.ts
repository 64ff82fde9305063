import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { groupHasLiveMember } from "./process-group.js";

void test("a group with a running process is live; once it is killed it is not, even before anyone reaps it", async () => {
  const child = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
  const pgid = child.pid!;
  assert.equal(groupHasLiveMember(pgid), true);
  // Stop Node from reaping it: the killed child stays a zombie until the 'exit' listener runs.
  process.kill(-pgid, "SIGKILL");
  let live = true;
  for (let i = 0; i < 100 && live; i++) {
    await sleep(5);
    live = groupHasLiveMember(pgid);
  }
  assert.equal(live, false);
});

void test("an unknown group has no live member", () => {
  assert.equal(groupHasLiveMember(2 ** 22 - 3), false);
});
