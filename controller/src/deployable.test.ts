import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Keyring, addTestOrgKey, createTestDatabase, createTestProject, getWrappedOrgKey, type TestDatabase } from "@flowsvc/store";

const MAIN = join(import.meta.dirname, "main.js");

let db: TestDatabase;
const masterKey = randomBytes(32);

before(async () => {
  db = await createTestDatabase();
  const { orgId } = await createTestProject(db.pool);
  const keyring = await Keyring.create(db.pool, masterKey);
  await addTestOrgKey(db.pool, keyring, orgId);
  assert.ok(await getWrappedOrgKey(db.pool, orgId));
});
after(async () => db?.drop());

/** The controller bin with this master key, until it exits. */
const runController = (key: string): Promise<{ code: number | null; stderr: string }> =>
  new Promise((resolve, reject) => {
    const env = { PATH: process.env.PATH ?? "", FLOWSVC_DATABASE_URL: db.url, FLOWSVC_MASTER_KEY: key, KUBECONFIG: "/nonexistent" };
    const child = spawn(process.execPath, [MAIN], { env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr }));
  });

// The right key is every other start's (test/src/kube/operator.test.ts, helm.test.ts).
test("a master key that does not open the database's org keys stops the start, saying so", async () => {
  const wrong = await runController(randomBytes(32).toString("base64"));
  assert.equal(wrong.code, 1, wrong.stderr);
  assert.match(wrong.stderr, /the master key does not open this database's org keys/);
  assert.match(wrong.stderr, /start with the FLOWSVC_MASTER_KEY/);
  assert.doesNotMatch(wrong.stderr, /listening|KUBECONFIG|ENOENT/, "refused before anything else starts");
});
