/**
 * Approval gates and the model patterns end to end (issue 10, items 4, 5 and 7), one real `flow
 * server` for the file, the real `flow` CLI, and protocol-faithful peers of the Anthropic Messages
 * API and Slack (test/src/peers) that the server reaches through FLOWSVC_CONNECTOR_BASE_URLS:
 *
 * - a gate cleared by `flow approve` with typed fields, its output read by a later connector node;
 *   refused without a required field (exact message, run still parked); `run.awaiting` once per
 *   wait; the approver in `flow status`;
 * - a gate a running job tries to clear: `flow approve` and every value of its environment as a
 *   token from inside the job, and a job token taken from a claim over raw HTTP: all refused;
 * - an expired gate: `timed_out: true` and `run.wait_expired`;
 * - both model patterns from examples/graphs against the LLM peer, including a reply that holds
 *   the routing word inside a sentence (it goes to the human branch).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { claimReadyJobs, createPool, mintToken } from "@flowsvc/store";
import { REPO_ROOT, startTestServer, type TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { ok, runIdIn, runKit } from "./support/runs.js";
import { isTerminalStatus } from "@flowsvc/core";
import { waitFor } from "./support/wait.js";
import { LlmPeer, exampleReply } from "./peers/llm.js";
import { SlackPeer } from "./peers/slack.js";

const LLM_KEY = "sk-ant-approvals-e2e-7731";
const SLACK_TOKEN = "xoxb-approvals-e2e-4410";

interface NodeView {
  node_id: string;
  status: string;
  output: Record<string, unknown> | null;
  error: string | null;
}
interface GraphView {
  status: string;
  error: string | null;
  substate?: { name?: string; kind?: string } | null;
  nodes: NodeView[];
}
interface EventView {
  type: string;
  payload: Record<string, unknown>;
}

let server: TestServer;
let dir: string;
const llm = new LlmPeer({ apiKey: LLM_KEY, reply: exampleReply });
const slack = new SlackPeer({ token: SLACK_TOKEN, channels: ["C0DEPLOY"] });
const kit = runKit(
  () => server,
  () => dir,
);

const graph = (nodes: unknown[], edges: Array<[string, string]> = []): string =>
  JSON.stringify({ version: "flowsvc-graph/v1", nodes, edges: edges.map(([from, to]) => ({ from, to })) });

const submitGraph = async (name: string, doc: string, input: unknown = {}): Promise<string> =>
  runIdIn(ok(await server.cli(["submit", await kit.script(`${name}.json`, doc), "--input", JSON.stringify(input)])).stdout);

const SCOPED = "/api/v1/orgs/default/projects/default";
/** A GET of the user API as the server's admin: polling through HTTP, not a `flow` process per look. */
const api = async <T>(path: string): Promise<T> => {
  const r = await fetch(`${server.url}${SCOPED}${path}`, { headers: { authorization: `Bearer ${server.token}` } });
  assert.equal(r.status, 200, `GET ${path}`);
  return (await r.json()) as T;
};
const view = (run: string): Promise<GraphView> => api<GraphView>(`/runs/${run}`);
const node = (v: GraphView, id: string): NodeView => {
  const n = v.nodes.find((x) => x.node_id === id);
  assert.ok(n, `no node ${id} in ${JSON.stringify(v.nodes)}`);
  return n;
};
const endsAs = async (run: string, want: string): Promise<GraphView> => {
  let v: GraphView | undefined;
  await waitFor(`run ${run} to end`, async () => isTerminalStatus((v = await view(run)).status), 60_000);
  assert.equal(v!.status, want, JSON.stringify(v, null, 2));
  return v!;
};
const parkedOn = async (run: string, gate: string): Promise<GraphView> => {
  await waitFor(`run ${run} to park on ${gate}`, async () => (await view(run)).substate?.name === gate, 20_000);
  return view(run);
};
/** The run's lifecycle events of `type`. */
const eventsOf = async (run: string, type: string): Promise<EventView[]> =>
  (await api<EventView[]>(`/events?type=${type}&limit=500`)).filter((e) => e.payload["run_id"] === run);

const example = async (name: string): Promise<string> => readFile(join(REPO_ROOT, "examples", "graphs", name), "utf8");

before(async () => {
  await Promise.all([llm.start(), slack.start()]);
  server = await startTestServer({
    agents: 2,
    env: { FLOWSVC_CONNECTOR_BASE_URLS: JSON.stringify({ anthropic: llm.url, slack: `${slack.url}/api` }) },
  });
  dir = await scriptDir("flowsvc-approvals-");
  ok(await server.cli(["credential", "set", "anthropic", "--kind", "api-key", "--header", "x-api-key", "--value", LLM_KEY]));
  ok(await server.cli(["credential", "set", "slack", "--kind", "bearer", "--token", "-"], { input: SLACK_TOKEN }));
});

after(async () => {
  await server?.stop();
  await Promise.all([llm.stop(), slack.stop()]);
  await rm(dir, { recursive: true, force: true });
});

const FIELDS = [
  { name: "reason", type: "text", required: true },
  { name: "env", type: "select", options: ["staging", "production"], default: "staging" },
];

void test("a gate cleared by flow approve with typed fields: refused without the required field, its output read by a later node", async () => {
  const doc = graph(
    [
      { id: "gate", type: "approval", config: { prompt: { $template: "Deploy {{ input.change }}?" }, fields: FIELDS } },
      {
        id: "notify",
        type: "slack.post_message",
        config: {
          credential: "slack",
          with: { channel: "C0DEPLOY" },
          input: { $template: "{{ nodes.gate.output.reason }} -> {{ nodes.gate.output.env }} by {{ nodes.gate.output.approved_by }}" },
        },
      },
    ],
    [["gate", "notify"]],
  );
  const run = await submitGraph("typed", doc, { change: "v2" });
  await parkedOn(run, "gate");

  const refused = await server.cli(["approve", run]);
  assert.equal(refused.code, 2, refused.stderr);
  // The exact message, then the full field schema (the CLI prints `error: <message>`).
  assert.ok(
    refused.stderr.startsWith(`error: approval field "reason" is required\n${JSON.stringify({ fields: FIELDS }, null, 2)}\n`),
    refused.stderr,
  );
  const stillParked = await view(run);
  assert.deepEqual([stillParked.status, node(stillParked, "gate").status], ["parked", "parked"]);
  assert.equal(slack.posts.length, 0);

  const approved = ok(await server.cli(["approve", run, "gate", "--field", "reason=tests pass", "--field", "env=production"]));
  const who = /^approved gate gate of run \S+ as (\S+)$/m.exec(approved.stdout)?.[1];
  assert.ok(who, approved.stdout);
  const v = await endsAs(run, "succeeded");
  assert.deepEqual(node(v, "gate").output, { decision: "approve", reason: "tests pass", env: "production", approved_by: who });
  assert.equal(slack.posts.at(-1)?.text, `tests pass -> production by ${who}`);
  assert.match(ok(await server.cli(["status", run])).stdout, new RegExp(`approvals:\\s+gate  approved by ${who}`));
  const awaiting = await eventsOf(run, "run.awaiting");
  assert.equal(awaiting.length, 1, "one run.awaiting for the one wait (the refused answer made none)");
  assert.equal(awaiting[0]!.payload["prompt"], "Deploy v2?");
  // A second answer to a resolved gate changes nothing.
  const again = await server.cli(["approve", run, "gate", "--field", "reason=again"]);
  assert.notEqual(again.code, 0);
  assert.match(again.stderr, /not parked on gate gate|has no|not parked/);
});

void test("a running job cannot clear its own gate: flow approve, its environment's values and a claimed job token are all refused", async () => {
  // The job runs beside the gate in the same graph run, and reports what it tried.
  const source = [
    // The in-script client alone (PATH holds only its directory): it has no approve and no user CLI to hand it to.
    'inscript=$(dirname "$(command -v flow)")',
    'out=$(PATH="$inscript" FLOW_USER_CLI= flow approve "$FLOW_WORKFLOW_ID" gate --field reason=self 2>&1) && echo "APPROVE-OK $out" || echo "APPROVE-REFUSED $out"',
    // The user CLI installed beside it, pointed at the server: it has no user token to send.
    'out=$(FLOW_USER_CLI="{{ input.cli }}" FLOWSVC_URL="{{ input.url }}" FLOWSVC_CONFIG=/nonexistent flow approve "$FLOW_WORKFLOW_ID" gate --field reason=self 2>&1) && echo "USER-CLI-OK $out" || echo "USER-CLI-REFUSED $out"',
    `node -e '
      const url = process.argv[1] + "/api/v1/orgs/default/projects/default/runs/" + process.env.FLOW_WORKFLOW_ID + "/approvals/gate";
      const tokens = Object.values(process.env).filter((v) => v && !/[\\r\\n]/.test(v));
      (async () => {
        const codes = new Set();
        for (const t of tokens) {
          const r = await fetch(url, { method: "POST", headers: { authorization: "Bearer " + t, "content-type": "application/json" }, body: JSON.stringify({ decision: "approve", fields: { reason: "self" } }) });
          codes.add(r.status);
        }
        console.log("HTTP-CODES " + [...codes].sort().join(","));
      })();' "{{ input.url }}"`,
  ].join("\n");
  const doc = graph([
    { id: "gate", type: "approval", config: { prompt: "only a person", fields: FIELDS } },
    { id: "sneak", type: "code", config: { source: { $template: source } } },
  ]);
  const run = await submitGraph("sneak", doc, { url: server.url, cli: join(REPO_ROOT, "cli", "bin", "flow.js") });
  await waitFor("the job to finish", async () => node(await view(run), "sneak").status === "success", 30_000);
  const v = await view(run);
  const stdout = String(node(v, "sneak").output?.["stdout"]);
  // Inside a job `flow` is the in-script client: it has no approve, and the job has no user token to give it.
  assert.match(stdout, /^APPROVE-REFUSED error: the flow user CLI is not installed here/m);
  // As root the job runs as the agent user, which cannot reach a checkout under a 0700 directory
  // (a mktemp -d clone): there the user CLI itself is out of its reach, and that refuses too.
  assert.match(stdout, /^USER-CLI-REFUSED error: (.*(token|401|unauthenticated)|FLOW_USER_CLI=.* is not an executable file)/im);
  assert.match(stdout, /HTTP-CODES 401$/m);

  // A job token taken from a claim: live on the agent API, refused on the approvals route, every time.
  // Its job waits for a capability no agent has: the test claims it as an agent would, and holds its token.
  const held = await submitGraph(
    "held",
    graph([{ id: "held", type: "code", config: { source: "true", requires: "approvals-e2e-nobody" } }]),
  );
  assert.ok(server.databaseUrl, "the test server runs on the test cluster");
  const pool = createPool(server.databaseUrl, { max: 1 });
  try {
    const { token, digest } = mintToken("job");
    // The driver queues the node's job once it starts the node: claim it as soon as it is there.
    let claimed: string | undefined;
    await waitFor("the held node's job to be queued", async () => {
      const jobs = await claimReadyJobs(pool, {
        limit: 1,
        leaseMs: 60_000,
        capabilities: ["approvals-e2e-nobody"],
        mintDigest: () => digest,
      });
      claimed = jobs[0]?.run_id;
      return claimed !== undefined;
    });
    assert.equal(claimed, held);
    const post = (path: string, body: unknown) =>
      fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    assert.equal((await post("/agent/v1/claim", { agent_id: "approvals-e2e" })).status, 200, "the job token is live");
    for (let i = 0; i < 3; i++) {
      const r = await post(`/api/v1/orgs/default/projects/default/runs/${run}/approvals/gate`, {
        decision: "approve",
        fields: { reason: "job" },
      });
      assert.equal(r.status, 401, await r.text());
    }
  } finally {
    await pool.end();
  }
  const still = await view(run);
  assert.deepEqual([still.status, node(still, "gate").status], ["parked", "parked"]);
  ok(await server.cli(["approve", run, "--field", "reason=a person"]));
  await endsAs(run, "succeeded");
  ok(await server.cli(["cancel", held]));
});

void test("an expired gate succeeds with timed_out and emits run.wait_expired; a rejected gate fails the run", async () => {
  const expiring = graph(
    [
      { id: "gate", type: "approval", config: { prompt: "quick", timeout: "1s" } },
      { id: "after", type: "shell", config: { command: { $template: "echo timed_out={{ nodes.gate.output.timed_out }}" } } },
    ],
    [["gate", "after"]],
  );
  const run = await submitGraph("expiring", expiring);
  const v = await endsAs(run, "succeeded");
  assert.deepEqual(node(v, "gate").output, { timed_out: true });
  assert.match(String(node(v, "after").output?.["stdout"]), /timed_out=true/);
  assert.equal((await eventsOf(run, "run.wait_expired")).length, 1);
  assert.equal((await eventsOf(run, "run.awaiting")).length, 1);

  const rejecting = graph(
    [
      { id: "gate", type: "approval", config: { prompt: "no" } },
      { id: "after", type: "shell", config: { command: "echo ran" } },
    ],
    [["gate", "after"]],
  );
  const rejected = await submitGraph("rejecting", rejecting);
  await parkedOn(rejected, "gate");
  const out = ok(await server.cli(["approve", rejected, "--reject"]));
  assert.match(out.stdout, /^rejected gate gate of run/m);
  const r = await endsAs(rejected, "failed");
  assert.match(node(r, "gate").error ?? "", /the gate was rejected by \S+/);
  assert.notEqual(node(r, "after").status, "success");
  assert.match(ok(await server.cli(["status", rejected])).stdout, /gate {2}rejected by \S+/);
});

void test("model routes, never approves: exact 'auto' deploys alone; a sentence holding the word goes to the gate", async () => {
  const doc = await example("model-routes.json");
  const calls = llm.calls.length;
  const auto = await submitGraph("routes-auto", doc, { change: "docs fix a typo" });
  const a = await endsAs(auto, "succeeded");
  assert.deepEqual(
    [node(a, "route").output?.["branch"], node(a, "review").status, node(a, "deploy").status],
    ["auto", "skipped", "success"],
  );
  assert.equal((await eventsOf(auto, "run.awaiting")).length, 0);
  assert.equal(llm.requests.at(-1)?.headers["x-api-key"], LLM_KEY);

  const sentence = await submitGraph("routes-sentence", doc, { change: "maybe a db migration" });
  const parked = await parkedOn(sentence, "review");
  assert.equal(node(parked, "route").output?.["branch"], "human");
  assert.match(String((node(parked, "classify").output?.["body"] as { content: Array<{ text: string }> }).content[0]!.text), /auto/);
  assert.equal(node(parked, "deploy").status, "pending");
  ok(await server.cli(["approve", sentence, "review", "--field", "reason=checked the migration"]));
  const s = await endsAs(sentence, "succeeded");
  assert.match(String(node(s, "deploy").output?.["stdout"]), /deploying maybe a db migration \(human\)/);
  assert.equal(llm.calls.length, calls + 2);
});

void test("model advises: always gated, the model's text in the prompt; approved with a required text and an optional textarea", async () => {
  const run = await submitGraph("advises", await example("model-advises.json"), { change: "v3 rollout" });
  await parkedOn(run, "review");
  const [awaiting] = await eventsOf(run, "run.awaiting");
  assert.match(
    String(awaiting?.payload["prompt"]),
    /^Deploy v3 rollout\? The model advises:\n\nThe change "v3 rollout" touches the deploy path/,
  );
  ok(await server.cli(["approve", run, "--field", "reason=read the advice", "--field", "notes=rollback plan\nis ready"]));
  const v = await endsAs(run, "succeeded");
  assert.equal(node(v, "review").output?.["notes"], "rollback plan\nis ready");
  assert.match(String(node(v, "deploy").output?.["stdout"]), /deploying v3 rollout: approved by \S+ \(read the advice\)/);
});
