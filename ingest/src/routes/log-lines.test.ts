/** `GET {scoped}/runs/:id/log/lines` over app.inject(): windows of the log by line equal the log route's text, and the refusals. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { PIPELINE_WORKFLOW } from "@flowsvc/core";
import { appendLogs, createRun, withTransaction } from "@flowsvc/store";
import { LogLineIndexes } from "../log-lines.js";
import { ask, assertCallerRefusals, assertError, createTestApp, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let runs: string;
before(async () => {
  t = await createTestApp();
  runs = `${t.project.base}/runs`;
});
after(() => t.close());

interface Window {
  from: number;
  lines: string[];
  total: number;
  partial: boolean;
  done: boolean;
  status: string;
}

const lines = async (id: string, query: string): Promise<Window> => {
  const res = await ask(t, "GET", `${runs}/${id}/log/lines?${query}`, { as: "viewer" });
  assert.equal(res.status, 200, res.text);
  return res.body as Window;
};

/** The log route's text as lines: what every window must agree with. */
const logText = async (id: string): Promise<{ lines: string[]; partial: boolean }> => {
  const text = (await ask(t, "GET", `${runs}/${id}/log`, { as: "viewer" })).text;
  const all = text.split("\n");
  const partial = !text.endsWith("\n") && text !== "";
  if (!partial) all.pop();
  return { lines: all, partial };
};

/**
 * Every window of sizes 1, 2, 3 and 7 from every line, and the tails, against the log route's text:
 * read from the line index itself (the route's own checks are below), so the many windows stay fast.
 */
const assertWindows = async (id: string): Promise<void> => {
  const want = await logText(id);
  const total = want.lines.length;
  const index = await new LogLineIndexes(t.db.pool).of(id);
  for (const limit of [1, 2, 3, 7])
    for (let from = 1; from <= total + 1; from++) {
      const w = await index.window(t.db.pool, from, limit);
      assert.deepEqual(w.lines, want.lines.slice(from - 1, from - 1 + limit), `from=${from} limit=${limit}`);
      assert.equal(w.total, total);
      assert.equal(w.partial, want.partial && from - 1 + limit >= total && from <= total, `partial at from=${from} limit=${limit}`);
    }
  for (const tail of [1, 3, total + 5]) assert.deepEqual((await index.tail(t.db.pool, tail)).lines, want.lines.slice(-tail));
};

const scriptRun = async (): Promise<string> =>
  ((await ask(t, "POST", runs, { body: { kind: "script", source: "echo hi\n", filename: "hi.sh" } })).body as { id: string }).id;

test("windows by line cut across rows, empty rows, blank lines, CR and an unfinished last line exactly as the log route", async () => {
  const id = await scriptRun();
  const empty = await lines(id, "from=1");
  assert.deepEqual([empty.lines, empty.total, empty.partial, empty.done, empty.status], [[], 0, false, false, "queued"]);
  const chunks = ["a1\na2", "", "-end\n\n", "b1\r\nb2\n", "c", "1", "\nd1\nd2\nd3 ünï 😀\n", "e-unfinished"];
  for (const data of chunks) await appendLogs(t.db.pool, id, null, [{ stream: "stdout", data }]);
  await assertWindows(id);
  const w = await lines(id, "from=2&limit=2");
  assert.deepEqual(w, { from: 2, lines: ["a2-end", ""], total: 10, partial: false, done: false, status: "queued" });
  const end = await lines(id, "tail=2");
  assert.deepEqual([end.from, end.lines, end.partial], [9, ["d3 ünï 😀", "e-unfinished"], true]);
  assert.deepEqual((await lines(id, "from=100")).lines, [], "past the end: no lines");
  // The log grows: the same window answers the new lines, the unfinished one now finished.
  await appendLogs(t.db.pool, id, null, [{ stream: "stdout", data: " now\nf1\n" }]);
  assert.deepEqual((await lines(id, "tail=3")).lines, ["d3 ünï 😀", "e-unfinished now", "f1"]);
  await assertWindows(id);
});

test("a pipeline run's lines carry their job's prefix in every window, as `flow follow` prints them", async () => {
  const id = await withTransaction(t.db.pool, async (tx) => {
    const run = await createRun(tx, {
      projectId: t.project.projectId,
      source: "jobs: {}",
      filename: "ci.yaml",
      trusted: true,
      workflow: PIPELINE_WORKFLOW,
    });
    // A pipeline row's job is the job row's node (it outlives the node's settled attempt).
    for (const [job, node] of [
      ["job-build", "build--step1"],
      ["job-test", "test--step1"],
    ])
      await tx.query(`insert into jobs (id, run_id, status, kind, node_id) values ($1, $2, 'done', 'node', $3)`, [job, run.id, node]);
    return run.id;
  });
  // Two jobs' chunks interleaved, each splitting its own lines.
  const chunks: Array<[string, string]> = [
    ["job-build", "compiling a"],
    ["job-test", "t1\nt2"],
    ["job-build", "nd b\nlinked\n"],
    ["job-test", " ok\n"],
    ["job-build", "\n"],
    ["job-test", "t3"],
  ];
  for (const [job, data] of chunks) await appendLogs(t.db.pool, id, job, [{ stream: "stdout", data }]);
  const text = (await ask(t, "GET", `${runs}/${id}/log`, { as: "viewer" })).text;
  assert.match(text, /^\[build\] compiling a\[test\] t1\n\[test\] t2nd b\n\[build\] linked\n/, "the log route's prefixes");
  await assertWindows(id);
});

test("a 20,000-line log: a window deep inside reads the right lines, the total counts all of them", async () => {
  const id = await scriptRun();
  const n = 20_000;
  const chunk = (a: number, b: number): string => Array.from({ length: b - a }, (_, i) => `line ${a + i + 1}\n`).join("");
  for (let a = 0; a < n; a += 2500) await appendLogs(t.db.pool, id, null, [{ stream: "stdout", data: chunk(a, a + 2500) }]);
  const w = await lines(id, "from=12345&limit=3");
  assert.deepEqual([w.lines, w.total], [["line 12345", "line 12346", "line 12347"], n]);
  assert.deepEqual((await lines(id, "tail=1")).lines, [`line ${n}`]);
  assert.equal((await lines(id, "from=1&limit=5000")).lines.length, 5000);
});

test("200 rows of mixed sizes (merged into shapes by count and by text): sampled windows equal the log route's text", async () => {
  const id = await scriptRun();
  const rows = Array.from({ length: 200 }, (_, i) =>
    i % 37 === 0 ? "" : i % 23 === 0 ? `${"w".repeat(70_000)}\n` : i % 5 === 0 ? `r${i}-a\nr${i}-b` : `r${i}\n`,
  );
  for (let i = 0; i < rows.length; i += 50)
    await appendLogs(
      t.db.pool,
      id,
      null,
      rows.slice(i, i + 50).map((data) => ({ stream: "stdout", data })),
    );
  const want = await logText(id);
  const index = await new LogLineIndexes(t.db.pool).of(id);
  for (let from = 1; from <= want.lines.length; from += 3)
    for (const limit of [1, 40])
      assert.deepEqual((await index.window(t.db.pool, from, limit)).lines, want.lines.slice(from - 1, from - 1 + limit));
  assert.equal(index.total, want.lines.length);
});

test("line_max: a longer line keeps its first characters, never half a surrogate pair, and says how many more it had", async () => {
  const id = await scriptRun();
  const long = `${"x".repeat(15)}😀${"y".repeat(100)}`;
  await appendLogs(t.db.pool, id, null, [{ stream: "stdout", data: `short\n${long}\n${"z".repeat(40)}` }]);
  const w = await lines(id, "from=1&line_max=16");
  assert.deepEqual(w.lines, ["short", `${"x".repeat(15)} … [102 more characters]`, `${"z".repeat(16)} … [24 more characters]`]);
  assert.equal(w.partial, true);
  assert.deepEqual((await lines(id, "tail=1&line_max=17")).lines, [`${"z".repeat(17)} … [23 more characters]`]);
  assert.deepEqual((await lines(id, "from=2&limit=1")).lines, [long], "without line_max, the whole line");
  for (const bad of ["15", "1048577", "1e400", "-16", "abc"])
    assertError(await ask(t, "GET", `${runs}/${id}/log/lines?line_max=${bad}`, { as: "viewer" }), 400, /^line_max: /, bad);
});

test("log/lines refuses callers and hostile query values, naming the parameter", async () => {
  const id = await scriptRun();
  await assertCallerRefusals(t, { method: "GET", url: `${runs}/${id}/log/lines` }, "viewer");
  assertError(await ask(t, "GET", `${t.other.base}/runs/${id}/log/lines`, { as: "outsider" }), 404, /not found/);
  for (const [query, message] of [
    ["from=0", /^from: /],
    ["from=-1", /^from: /],
    ["from=1e400", /^from: /],
    ["from=NaN", /^from: /],
    ["from=1.5", /^from: /],
    ["from=9007199254740993", /^from: /],
    ["from=%2531", /^from: /],
    ["limit=0", /^limit: /],
    ["limit=5001", /^limit: /],
    ["limit=Infinity", /^limit: /],
    ["tail=-3", /^tail: /],
    ["from=1&tail=2", /^tail: give from or tail, not both/],
    ["from=%00", /NUL|control|invalid/i],
    ["from=%ZZ", /percent-encoding|invalid/i],
  ] as const)
    assertError(await ask(t, "GET", `${runs}/${id}/log/lines?${query}`, { as: "viewer" }), 400, message, query);
});
