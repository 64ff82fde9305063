/**
 * mayBeLocalRun decides once per process (the bundle's entry and signal.ts act on one answer), and
 * a text that is not a run id, or could leave the runs directory, is never a local run.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { localRunPath, localStateDir, mayBeLocalRun } from "./local-state-dir.js";

void test("a run's directory that appears (or goes) after the first answer does not change it", () => {
  const state = mkdtempSync(join(tmpdir(), "flow-state-"));
  try {
    const env = { XDG_STATE_HOME: state };
    const dir = localRunPath(localStateDir(env), "run-appears");
    assert.equal(mayBeLocalRun("run-appears", env), false);
    mkdirSync(dir, { recursive: true });
    assert.equal(mayBeLocalRun("run-appears", env), false, "decided when first asked");
    // Another run id, and the same id under another state directory, are asked afresh.
    mkdirSync(localRunPath(localStateDir(env), "run-there"), { recursive: true });
    assert.equal(mayBeLocalRun("run-there", env), true);
    rmSync(localRunPath(localStateDir(env), "run-there"), { recursive: true });
    assert.equal(mayBeLocalRun("run-there", env), true, "decided when first asked");
    const other = { XDG_STATE_HOME: join(state, "other") };
    mkdirSync(localRunPath(localStateDir(other), "run-appears"), { recursive: true });
    assert.equal(mayBeLocalRun("run-appears", other), true);
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
});

void test("only a run id can be a local run: no path out of the runs directory, no NUL", () => {
  const state = mkdtempSync(join(tmpdir(), "flow-state-"));
  try {
    const env = { XDG_STATE_HOME: state };
    mkdirSync(join(localStateDir(env), "runs", "run-x"), { recursive: true });
    for (const text of ["..", "run-x/..", "run-../..", "run-x\u0000", "run-x\\..", "x-run-x", "RUN-x", ""])
      assert.equal(mayBeLocalRun(text, env), false, JSON.stringify(text));
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
});
