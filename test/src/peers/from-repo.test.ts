/**
 * A workflow node's `from_repo` (controller/src/graph/nodes/workflow.ts) against the GitHub
 * contents peer, in process on a real Postgres: the file is read with the credential's token
 * (bearer or url-token) as GitHub's raw media type and becomes a script child run; any other kind
 * is refused before any request; a forge refusal fails the node with what the forge said, and no
 * child run is made. The NodeContext's `credential()` throws for a name not held or a kind not
 * accepted, as the engine's resolver does.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { FlowError, type CredentialKind, type CredentialValue } from "@flowsvc/core";
import { createTestDatabase, createTestProject, mintId, type TestDatabase } from "@flowsvc/store";
import { setForgeBaseUrls, workflowExecutor } from "@flowsvc/controller/graph/nodes/workflow";
import type { NodeContext, NodeOutcome } from "@flowsvc/controller/graph/nodes/types";
import { GithubContentsPeer } from "./github-contents.js";

const forge = new GithubContentsPeer({ token: "ghp_contents_token" })
  .file("acme/ops", "deploy/run.py", "print('deploying')\n")
  .file("acme/ops", "deploy/run.py", "print('from a branch')\n", "release-1");

const HELD: Record<string, CredentialValue> = {
  gh: { kind: "bearer", token: "ghp_contents_token" },
  "gh-url": { kind: "url_token", token: "ghp_contents_token" },
  "gh-old": { kind: "bearer", token: "ghp_revoked" },
  "gh-basic": { kind: "basic", username: "u", password: "ghp_contents_token" },
};

let db: TestDatabase;
let projectId: string;
let parentId: string;

before(async () => {
  await forge.start();
  setForgeBaseUrls({ github: forge.url });
  db = await createTestDatabase();
  ({ projectId } = await createTestProject(db.pool));
  parentId = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted)
     values ($1, $2, 'flowsvc-graph/v1', 'running', '{}', 'g.json', '{}', '{}', true)`,
    [parentId, projectId],
  );
});
after(async () => {
  setForgeBaseUrls({});
  await forge.stop();
  await db?.drop();
});

let attempt = 0;
const run = (from_repo: Record<string, unknown>): Promise<NodeOutcome> =>
  workflowExecutor.start({
    db: db.pool,
    run: { id: parentId, orgId: "o", projectId, rootRunId: parentId, parentRunId: null, trusted: true, input: {}, graphName: null },
    node: { id: "fetch", type: "workflow", config: {} },
    config: { from_repo },
    attempt: ++attempt,
    signal: new AbortController().signal,
    credential: (name: string, kinds?: readonly CredentialKind[]) => {
      const value = HELD[name];
      if (!value) return Promise.reject(new FlowError("invalid_argument", `credential "${name}" is not set in this project`));
      if (kinds && !kinds.includes(value.kind))
        return Promise.reject(
          new FlowError("invalid_argument", `credential "${name}" is stored as ${value.kind}; ${kinds.join(" or ")} is required`),
        );
      return Promise.resolve({ name, value, masks: [] });
    },
  } as unknown as NodeContext);

const childScript = async (o: NodeOutcome) => {
  assert.equal(o.kind, "child", JSON.stringify(o));
  const id = o.kind === "child" ? o.runId : "";
  const { rows } = await db.pool.query<{ source: string; filename: string; interpreter: string[]; parent_run_id: string }>(
    `select source, filename, interpreter, parent_run_id from runs where id = $1`,
    [id],
  );
  return rows[0]!;
};

test("a bearer or url-token credential reads the file raw; it runs as a child script named after the file", async () => {
  const child = await childScript(await run({ repo: "acme/ops", path: "deploy/run.py", credential: "gh" }));
  assert.deepEqual(child, { source: "print('deploying')\n", filename: "run.py", interpreter: ["python3"], parent_run_id: parentId });
  const req = forge.requests.at(-1)!;
  assert.equal(req.path, "/repos/acme/ops/contents/deploy/run.py");
  assert.equal(req.headers.authorization, "Bearer ghp_contents_token");
  assert.equal(req.headers.accept, "application/vnd.github.raw");
  const branch = await childScript(await run({ repo: "acme/ops", path: "deploy/run.py", ref: "release-1", credential: "gh-url" }));
  assert.equal(branch.source, "print('from a branch')\n");
  assert.equal(forge.requests.at(-1)!.path, "/repos/acme/ops/contents/deploy/run.py?ref=release-1");
});

test("another kind, a missing name, a revoked token or a missing file fails the node; nothing runs", async () => {
  const runs = async () => Number((await db.pool.query<{ n: string }>(`select count(*) as n from runs`)).rows[0]!.n);
  const before = [await runs(), forge.requests.length];
  for (const [credential, want] of [
    ["gh-basic", /credential "gh-basic" is stored as basic; bearer or url_token is required/],
    ["nope", /credential "nope" is not set/],
  ] as Array<[string, RegExp]>) {
    const o = await run({ repo: "acme/ops", path: "deploy/run.py", credential });
    assert.ok(o.kind === "failed" && want.test(o.error), JSON.stringify(o));
  }
  assert.equal(forge.requests.length, before[1], "a refused credential sends nothing");
  const revoked = await run({ repo: "acme/ops", path: "deploy/run.py", credential: "gh-old" });
  assert.ok(revoked.kind === "failed" && /answered 401: .*Bad credentials/.test(revoked.error), JSON.stringify(revoked));
  assert.ok(!JSON.stringify(revoked).includes("ghp_revoked"), "the token is not in the error");
  const missing = await run({ repo: "acme/ops", path: "deploy/nope.sh", credential: "gh" });
  assert.ok(missing.kind === "failed" && /answered 404: .*Not Found/.test(missing.error), JSON.stringify(missing));
  assert.equal(await runs(), before[0], "no child run was made");
});
