/**
 * A secret a script writes anywhere but its log (issue 14, item 3): outputs, annotations, emitted
 * payloads (top level, nested, as an object key, inside an array), the emit key, a step's and an
 * activity's output, a signal's payload echoed into an output. No response of the API or the CLI
 * carries the value, and no row that holds what a run wrote keeps it in clear; step and activity
 * output is sealed at rest and still replays byte for byte, also into a rerun.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { request } from "undici";
import { SEALED_JOURNAL_PREFIX } from "@flowsvc/core";
import { startTestServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

// Multi-byte characters, so a response that re-encodes text would show a half of it.
const SECRET = "Tr0ub4dor-Välue-€-9321";
const PARTS = [SECRET, "Tr0ub4dor", "Välue-€"];
const scoped = "/api/v1/orgs/default/projects/default";

let server: TestServer;
let dir: string;
let pool: pg.Pool;

before(async () => {
  server = await startTestServer();
  dir = await mkdtemp(join(tmpdir(), "flowsvc-secret-channels-"));
  assert.ok(server.databaseUrl);
  pool = new pg.Pool({ connectionString: server.databaseUrl });
  assert.equal((await server.cli(["secret", "set", "API_TOKEN", SECRET])).code, 0);
});

after(async () => {
  await pool?.end();
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const get = async (path: string): Promise<{ status: number; text: string }> => {
  const res = await request(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.token}` } });
  return { status: res.statusCode, text: await res.body.text() };
};

const assertClean = (what: string, text: string): void => {
  for (const part of PARTS) assert.ok(!text.includes(part), `${what} carries "${part}":\n${text}`);
};

const cliOk = async (args: string[]): Promise<string> => {
  const r = await server.cli(args);
  assert.equal(r.code, 0, `flow ${args.join(" ")}: ${r.stderr}`);
  assertClean(`flow ${args.join(" ")} (stderr)`, r.stderr);
  return r.stdout;
};

const statusOf = async (
  run: string,
): Promise<{ status: string; substate: { name: string } | null; output: Record<string, unknown> | null; error: string | null }> =>
  JSON.parse(await cliOk(["status", run, "-o", "json"])) as never;

const submit = async (name: string, lines: readonly string[]): Promise<string> => {
  const file = join(dir, name);
  await writeFile(file, ["set -e", ...lines].join("\n") + "\n");
  return (await cliOk(["submit", file])).trim();
};

const finished = async (run: string): Promise<{ status: string; output: Record<string, unknown> | null; error: string | null }> => {
  await waitFor(`run ${run} to finish`, async () => ["succeeded", "failed", "cancelled"].includes((await statusOf(run)).status), 60_000);
  return statusOf(run);
};

/** The rows: what the run wrote is stored masked; step and activity output is sealed. */
const assertRowsClean = async (run: string): Promise<void> => {
  const runRow = await pool.query<{ output: string; annotations: string; error: string | null }>(
    `select output::text, annotations::text, error from runs where id = $1`,
    [run],
  );
  assertClean("runs.output", runRow.rows[0]!.output);
  assertClean("runs.annotations", runRow.rows[0]!.annotations);
  assert.match(runRow.rows[0]!.annotations, /note: \*\*\*/);
  const eventRows = await pool.query<{ type: string; key: string | null; payload: string | null }>(
    `select type, key, payload::text from events`,
  );
  assert.ok(eventRows.rows.some((e) => e.type === "leak.nested"));
  for (const e of eventRows.rows) assertClean(`events ${e.type}`, `${e.key ?? ""} ${e.payload ?? ""}`);
  const journal = await pool.query<{ kind: string; name: string; result: unknown; text: string }>(
    `select kind, name, result, result::text as text from journal where run_id = $1 order by position`,
    [run],
  );
  const step = journal.rows.find((r) => r.kind === "step");
  const act = journal.rows.find((r) => r.kind === "activity");
  assert.ok(
    typeof step?.result === "string" && step.result.startsWith(SEALED_JOURNAL_PREFIX),
    `the step's result is sealed: ${step?.text}`,
  );
  assert.ok(
    String((act?.result as { stdout_b64?: string } | null)?.stdout_b64).startsWith(SEALED_JOURNAL_PREFIX),
    `the activity's stdout is sealed: ${act?.text}`,
  );
  // A signal's payload is what a person sent, kept as sent; everything the run wrote is not in clear.
  for (const r of journal.rows.filter((j) => j.kind !== "wait-signal")) assertClean(`journal ${r.kind} ${r.name}`, r.text);
  const activity = await pool.query<{ stdout_b64: string }>(`select stdout_b64 from activities where run_id = $1`, [run]);
  assert.ok(activity.rows[0]!.stdout_b64.startsWith(SEALED_JOURNAL_PREFIX));
  assertClean("activities.stdout_b64", activity.rows[0]!.stdout_b64);
};

void test("a secret written through outputs, annotations, emits, steps, activities and a signal comes back from no response and sits in clear in no row", async () => {
  const run = await submit("channels.sh", [
    'flow output set leak="$API_TOKEN" "key-$API_TOKEN=v"',
    'flow annotate "note: $API_TOKEN"',
    'flow emit leak.top --payload "\\"$API_TOKEN\\""',
    'flow emit leak.nested --key "subject-$API_TOKEN" --payload "{\\"a\\":{\\"b\\":[\\"x\\",\\"in-array-$API_TOKEN\\"]},\\"$API_TOKEN\\":\\"as-key\\"}"',
    'out=$(flow step show -- bash -c \'printf "step: %s" "$API_TOKEN"\')',
    'act=$(flow activity act -- bash -c \'printf "act: %s" "$API_TOKEN"\')',
    'echo "log: $out / $act"',
    "sig=$(flow wait-signal go)",
    'flow output set step="$out" act="$act" sig="$sig"',
  ]);
  await waitFor("the run to park on its signal", async () => (await statusOf(run)).substate?.name === "go", 60_000);
  await cliOk(["signal", run, "go", "--payload", JSON.stringify({ v: SECRET })]);
  const done = await finished(run);
  assert.equal(done.status, "succeeded", done.error ?? "");
  // What the script handed over arrived, masked: the step, the activity and the signal gave the
  // script the value itself (the comparison in the replay test below proves it byte for byte).
  assert.deepEqual(
    { ...done.output, duration_ms: 0 },
    { leak: "***", "key-***": "v", step: "step: ***", act: "act: ***", sig: '{"v":"***"}', exit_code: 0, duration_ms: 0 },
  );

  // Every CLI view of the run and the bus.
  assertClean("flow status", await cliOk(["status", run]));
  assertClean("flow status -o json", await cliOk(["status", run, "-o", "json"]));
  assertClean("flow steps -o json", await cliOk(["steps", run, "-o", "json"]));
  assertClean("flow follow", await cliOk(["follow", run]));
  assertClean("flow runs ls -o json", await cliOk(["runs", "ls", "-o", "json"]));
  const events = JSON.parse(await cliOk(["events", "ls", "-o", "json", "--limit", "1000"])) as Array<{
    id: string;
    type: string;
    key: string | null;
    payload: unknown;
  }>;
  assertClean("flow events ls -o json", JSON.stringify(events));
  assertClean("flow events catalog -o json", await cliOk(["events", "catalog", "-o", "json"]));
  const nested = events.find((e) => e.type === "leak.nested");
  assert.deepEqual(
    { key: nested?.key, payload: nested?.payload },
    { key: "subject-***", payload: { a: { b: ["x", "in-array-***"] }, "***": "as-key" } },
  );
  assert.equal(events.find((e) => e.type === "leak.top")?.payload, "***");
  const succeeded = events.find((e) => e.type === "run.succeeded" && (e.payload as { run_id?: string }).run_id === run);
  assert.ok(succeeded, "run.succeeded was published");
  assert.equal((succeeded.payload as { output: { leak: string } }).output.leak, "***");
  for (const e of [nested, succeeded]) assertClean(`flow events show ${e!.id}`, await cliOk(["events", "show", e!.id, "-o", "json"]));

  // Every user API route that shows a run or an event, raw.
  const paths = [
    `${scoped}/runs`,
    `${scoped}/runs?status=succeeded`,
    `${scoped}/runs/${run}`,
    `${scoped}/runs/${run}/steps`,
    `${scoped}/runs/${run}/log`,
    `${scoped}/events?limit=1000`,
    `${scoped}/events?type=run.succeeded`,
    `${scoped}/events/catalog`,
    ...events.map((e) => `${scoped}/events/${e.id}`),
  ];
  for (const p of paths) {
    const res = await get(p);
    assert.equal(res.status, 200, p);
    assertClean(`GET ${p}`, res.text);
  }

  await assertRowsClean(run);
});

void test("a failed run: its annotation, its steps and its run.failed event carry no secret", async () => {
  const run = await submit("fails.sh", ['flow annotate "$API_TOKEN"', "flow step boom -- bash -c 'echo \"$API_TOKEN\"; exit 3'"]);
  const done = await finished(run);
  assert.equal(done.status, "failed");
  assertClean("flow status -o json", JSON.stringify(done));
  const failed = (
    JSON.parse(await cliOk(["events", "ls", "--type", "run.failed", "-o", "json"])) as Array<{ payload: { run_id: string } }>
  ).find((e) => e.payload.run_id === run);
  assert.ok(failed);
  assertClean("run.failed", JSON.stringify(failed));
  const steps = await get(`${scoped}/runs/${run}/steps`);
  assertClean("steps", steps.text);
  assert.match(steps.text, /"exit_code":3/);
});

void test("a step's sealed output replays to the script byte for byte, after a sleep and into a rerun", async () => {
  const run = await submit("replay.sh", [
    // The step prints the secret and a value that differs on each execution: a replay must give back
    // the recorded bytes, not run the step again, and not a masked copy.
    'out=$(flow step show -- bash -c \'printf "%s|%s" "$API_TOKEN" "$RANDOM$RANDOM"\')',
    "flow sleep 0s",
    'flow step check -- test "${out%|*}" = "$API_TOKEN"',
    'test "${out%|*}" = "$API_TOKEN"',
    'first=$(flow step first -- bash -c "echo \\"$out\\"")',
    'test "$first" = "$out"',
  ]);
  const done = await finished(run);
  assert.equal(done.status, "succeeded", done.error ?? (await server.cli(["follow", run])).stdout);
  const steps = JSON.parse(await cliOk(["steps", run, "-o", "json"])) as Array<{
    kind: string;
    name: string;
    status: string;
    output_bytes: number | null;
  }>;
  assert.deepEqual(
    steps.map((s) => `${s.kind}:${s.name}:${s.status}`),
    ["step:show:done", "sleep::done", "step:check:done", "step:first:done"],
  );
  // output_bytes is measured on the opened output: the secret's UTF-8 bytes, "|" and the digits.
  const show = steps[0]!;
  assert.ok(show.output_bytes !== null && show.output_bytes > Buffer.byteLength(SECRET) + 1, JSON.stringify(show));

  // The rerun keeps `show` and the sleep, sealed for the source run: they open in the rerun too.
  const rerun = (await cliOk(["rerun", run, "--from", "check"])).trim();
  const again = await finished(rerun);
  assert.equal(again.status, "succeeded", again.error ?? (await server.cli(["follow", rerun])).stdout);
});
