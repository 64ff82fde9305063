import { test } from "node:test";
import assert from "node:assert/strict";
import { JobLinePrefixer } from "./log-prefix.js";

void test("a pipeline's log lines are prefixed by job where a line starts, across chunks that split lines and interleave jobs", () => {
  const p = new JobLinePrefixer();
  const out = [
    p.write("build", "compil"),
    p.write("test", "t1 ok\nt2 "),
    p.write("build", "ing\ndone\n"),
    p.write("test", "ok\n"),
    p.write(null, "system line\n"),
    p.write("build", ""),
    p.write("deploy", "\u0000 [x] \n"),
  ].join("");
  assert.equal(out, "[build] compil[test] t1 ok\n[test] t2 ing\n[build] done\nok\nsystem line\n[deploy] \u0000 [x] \n");
});
