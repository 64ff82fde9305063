import { test } from "node:test";
import assert from "node:assert/strict";
import { GITHUB_SIGNATURE_HEADER, shapeGithubDelivery, verifyGithubSignature } from "./github.js";
import { signHmacSha256 } from "./hmac.js";
import { buildEnvelope, celEventVars, envelopeTriggerEnv } from "./envelope.js";
import { compileCel, evaluatePredicate } from "./cel.js";
import { FlowError } from "./errors.js";

// Fixtures follow GitHub's webhook payloads (docs.github.com, "Webhook events and payloads"),
// trimmed to the fields a reader would look for.

const repository = (fullName: string, id: number) => ({
  id,
  node_id: "R_kgDOAbc",
  name: fullName.split("/")[1],
  full_name: fullName,
  private: false,
  owner: { login: fullName.split("/")[0], id: 1, type: "Organization" },
  html_url: `https://github.com/${fullName}`,
  default_branch: "main",
});
const user = (login: string, id: number) => ({ login, id, node_id: "U_kgDO", type: "User", site_admin: false });

const SHA_BEFORE = "6113728f27ae82c7b1a177c8d03f9e96e0adf246";
const SHA_AFTER = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c";

const commit = (id: string, files: { added: string[]; removed: string[]; modified: string[] } | undefined) => ({
  id,
  tree_id: "f9d2a07e9488b91af2641b26b9407fe22a451433",
  distinct: true,
  message: "Update docs",
  timestamp: "2024-05-01T10:00:00+02:00",
  url: `https://github.com/octo-org/app/commit/${id}`,
  author: { name: "Mona", email: "mona@example.com", username: "mona" },
  committer: { name: "GitHub", email: "noreply@github.com", username: "web-flow" },
  ...(files ?? {}),
});

const pushBody = (withFiles: boolean) => ({
  ref: "refs/heads/main",
  before: SHA_BEFORE,
  after: SHA_AFTER,
  created: false,
  deleted: false,
  forced: false,
  base_ref: null,
  compare: `https://github.com/octo-org/app/compare/6113728f27ae...${SHA_AFTER.slice(0, 12)}`,
  commits: [
    commit(
      "1111111111111111111111111111111111111111",
      withFiles ? { added: ["docs/new.md"], removed: [], modified: ["README.md"] } : undefined,
    ),
    commit(SHA_AFTER, withFiles ? { added: [], removed: ["old.txt"], modified: ["README.md", "src/app.ts"] } : undefined),
  ],
  head_commit: commit(SHA_AFTER, undefined),
  repository: repository("octo-org/app", 35129377),
  pusher: { name: "mona", email: "mona@example.com" },
  sender: user("mona", 21031067),
});

const pullRequestBody = (headRepo: string | null) => ({
  action: "opened",
  number: 42,
  pull_request: {
    url: "https://api.github.com/repos/octo-org/app/pulls/42",
    id: 1_811_711_111,
    number: 42,
    state: "open",
    title: "Fix typo",
    user: user(headRepo ? headRepo.split("/")[0]! : "ghost", 7),
    head: {
      label: `${headRepo ? headRepo.split("/")[0] : "ghost"}:fix-typo`,
      ref: "fix-typo",
      sha: "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432",
      user: user("someone", 7),
      repo: headRepo === null ? null : repository(headRepo, 99),
    },
    base: { label: "octo-org:main", ref: "main", sha: SHA_BEFORE, user: user("octo-org", 1), repo: repository("octo-org/app", 35129377) },
    author_association: headRepo === "octo-org/app" ? "MEMBER" : "CONTRIBUTOR",
    draft: false,
    merged: false,
  },
  repository: repository("octo-org/app", 35129377),
  sender: user(headRepo ? headRepo.split("/")[0]! : "ghost", 7),
});

const issueCommentBody = (association: string) => ({
  action: "created",
  issue: {
    number: 42,
    title: "Fix typo",
    user: user("stranger", 9),
    state: "open",
    pull_request: { url: "https://api.github.com/repos/octo-org/app/pulls/42" },
  },
  comment: {
    id: 2_000_000_001,
    body: "/deploy staging",
    user: user(association === "MEMBER" ? "mona" : "stranger", 9),
    author_association: association,
    created_at: "2024-05-01T10:00:00Z",
  },
  repository: repository("octo-org/app", 35129377),
  sender: user(association === "MEMBER" ? "mona" : "stranger", 9),
});

void test("a push is typed <hook>.push, keyed by the repository, with its fields and the union of its files", () => {
  const shaped = shapeGithubDelivery("gh", "push", pushBody(true));
  assert.equal(shaped.type, "gh.push");
  assert.equal(shaped.key, "octo-org/app");
  assert.equal(shaped.trusted, true);
  assert.equal(shaped.untrustedReason, undefined);
  assert.deepEqual(shaped.fields, {
    ref: "refs/heads/main",
    sha: SHA_AFTER,
    repo: "octo-org/app",
    sender: "mona",
    forge: "github",
    paths: ["README.md", "docs/new.md", "old.txt", "src/app.ts"],
    paths_known: true,
  });
  assert.deepEqual(shaped.payload, pushBody(true));
  const envelope = buildEnvelope({ id: "evt-1", type: shaped.type, key: shaped.key, payload: shaped.payload, fields: shaped.fields });
  assert.equal(envelopeTriggerEnv(envelope)["CI_TRIGGER_SHORT_SHA"], SHA_AFTER.slice(0, 7));
  const docs = compileCel('event.ref == "refs/heads/main" && (!event.paths_known || event.paths.exists(p, p.startsWith("docs/")))');
  assert.deepEqual(evaluatePredicate(docs, celEventVars(envelope)), { matched: true });
});

void test("a push without file lists has paths [] and paths_known false", () => {
  const shaped = shapeGithubDelivery("gh", "push", pushBody(false));
  assert.deepEqual(shaped.fields.paths, []);
  assert.equal(shaped.fields.paths_known, false);
  const tagDeleted = { ...pushBody(true), ref: "refs/tags/v1", deleted: true, commits: [] };
  assert.deepEqual(shapeGithubDelivery("gh", "push", tagDeleted).fields.paths_known, false);
});

void test("a pull request from the same repository is trusted and typed with its action", () => {
  const shaped = shapeGithubDelivery("gh", "pull_request", pullRequestBody("octo-org/app"));
  assert.equal(shaped.type, "gh.pull_request.opened");
  assert.equal(shaped.key, "octo-org/app");
  assert.equal(shaped.trusted, true);
  assert.deepEqual(shaped.fields, {
    sha: "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432",
    head_ref: "fix-typo",
    base_ref: "main",
    repo: "octo-org/app",
    sender: "octo-org",
    forge: "github",
  });
});

void test("a pull request from a fork, or from a deleted fork, is untrusted", () => {
  const fork = shapeGithubDelivery("gh", "pull_request", pullRequestBody("stranger/app"));
  assert.equal(fork.type, "gh.pull_request.opened");
  assert.equal(fork.trusted, false);
  assert.equal(fork.untrustedReason, "pull request #42 comes from the fork stranger/app, not octo-org/app");
  assert.equal(fork.fields.sha, "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432");
  const deleted = shapeGithubDelivery("gh", "pull_request", { ...pullRequestBody(null), action: "synchronize" });
  assert.equal(deleted.type, "gh.pull_request.synchronize");
  assert.equal(deleted.trusted, false);
  assert.match(deleted.untrustedReason ?? "", /comes from a deleted or unknown repository/);
});

void test("a comment is trusted only from an owner, member or collaborator", () => {
  const member = shapeGithubDelivery("gh", "issue_comment", issueCommentBody("MEMBER"));
  assert.equal(member.type, "gh.issue_comment");
  assert.equal(member.trusted, true);
  assert.deepEqual(member.fields, { repo: "octo-org/app", sender: "mona", forge: "github" });
  const contributor = shapeGithubDelivery("gh", "issue_comment", issueCommentBody("CONTRIBUTOR"));
  assert.equal(contributor.trusted, false);
  assert.equal(
    contributor.untrustedReason,
    "issue_comment by stranger, whose author_association is CONTRIBUTOR (not OWNER, MEMBER or COLLABORATOR)",
  );
  for (const association of ["NONE", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "MANNEQUIN"]) {
    assert.equal(shapeGithubDelivery("gh", "issue_comment", issueCommentBody(association)).trusted, false, association);
  }
  const review = {
    action: "submitted",
    review: { id: 1, user: user("stranger", 9), state: "approved", author_association: "NONE" },
    pull_request: pullRequestBody("octo-org/app").pull_request,
    repository: repository("octo-org/app", 35129377),
    sender: user("stranger", 9),
  };
  const shapedReview = shapeGithubDelivery("gh", "pull_request_review", review);
  assert.equal(shapedReview.type, "gh.pull_request_review");
  assert.equal(shapedReview.trusted, false);
  assert.equal(shapedReview.fields.head_ref, "fix-typo");
  const { author_association: _dropped, ...noAssociation } = issueCommentBody("MEMBER").comment;
  assert.equal(shapeGithubDelivery("gh", "issue_comment", { ...issueCommentBody("MEMBER"), comment: noAssociation }).trusted, false);
});

void test("ping is shaped too, and other events keep their name", () => {
  const ping = shapeGithubDelivery("gh", "ping", {
    zen: "Design for failure.",
    hook_id: 123,
    hook: { type: "Repository", events: ["push"] },
    repository: repository("octo-org/app", 1),
    sender: user("mona", 2),
  });
  assert.deepEqual({ type: ping.type, key: ping.key, trusted: ping.trusted }, { type: "gh.ping", key: "octo-org/app", trusted: true });
  const orgPing = shapeGithubDelivery("gh", "ping", { zen: "Keep it logically awesome.", hook_id: 9, organization: { login: "octo-org" } });
  assert.equal(orgPing.key, undefined);
  assert.equal(shapeGithubDelivery("gh", "issues", { action: "opened", repository: repository("octo-org/app", 1) }).type, "gh.issues");
  assert.equal(shapeGithubDelivery("gh", "release", { action: "published", repository: repository("octo-org/app", 1) }).type, "gh.release");
});

void test("a delivery with no event, a non-object body, or an invalid resulting type is refused", () => {
  const refused = (fn: () => unknown, message: RegExp) =>
    assert.throws(fn, (e: unknown) => e instanceof FlowError && e.code === "invalid_argument" && message.test(e.message));
  refused(() => shapeGithubDelivery("gh", "", {}), /x-github-event header is missing/);
  refused(() => shapeGithubDelivery("gh", "push", "not json"), /body is not a JSON object/);
  refused(() => shapeGithubDelivery("gh", "push", [1]), /body is not a JSON object/);
  refused(
    () => shapeGithubDelivery("gh", "pull_request", { ...pullRequestBody("octo-org/app"), action: "bad action" }),
    /must be 1-64 characters/,
  );
  refused(() => shapeGithubDelivery("h".repeat(60), "pull_request_review_comment", {}), /must be 1-64 characters/);
});

void test("signatures: good verifies; missing, malformed, wrong length and wrong value do not", async () => {
  assert.equal(GITHUB_SIGNATURE_HEADER, "x-hub-signature-256");
  const raw = new TextEncoder().encode(JSON.stringify(pushBody(true)));
  const good = `sha256=${await signHmacSha256("hook-key", raw)}`;
  assert.equal(await verifyGithubSignature("hook-key", raw, good), true);
  const cases: ReadonlyArray<string | undefined> = [
    undefined,
    "",
    "sha256=",
    "sha256",
    `sha1=${good.slice(7, 47)}`,
    good.slice(7),
    `sha256=${good.slice(7, 70)}`,
    `${good}ab`,
    `sha256=${"g".repeat(64)}`,
    `sha256=${"0".repeat(64)}`,
  ];
  for (const header of cases) assert.equal(await verifyGithubSignature("hook-key", raw, header), false, String(header));
  assert.equal(await verifyGithubSignature("other-key", raw, good), false);
  const tampered = new TextEncoder().encode(JSON.stringify({ ...pushBody(true), ref: "refs/heads/evil" }));
  assert.equal(await verifyGithubSignature("hook-key", tampered, good), false);
});
