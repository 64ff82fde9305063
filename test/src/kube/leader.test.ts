// Two real controller processes (`node controller/dist/main.js`) against the fake API server and a
// real Postgres: only the Lease holder dispatches (its Pods carry its identity), the standby waits,
// and after a kill -9 of the leader (no release) the standby takes over within the lease duration,
// adopts the Pod in flight and dispatches the next job. Also: a controller without a master key
// refuses to start, naming the variable.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { ApiextensionsV1Api, CoordinationV1Api, CoreV1Api, KubeConfig, type V1CustomResourceDefinition } from "@kubernetes/client-node";
import { createRun, createTestDatabase, mintId, withTransaction, type TestDatabase } from "@flowsvc/store";
import { waitFor } from "../support/wait.js";
import { flowCrds } from "./reconcile-harness.js";
import { startFakeApiServer, type FakeApiServer } from "./server.js";

const CONTROLLER_MAIN = join(dirname(fileURLToPath(import.meta.resolve("@flowsvc/controller"))), "main.js");
const LEASE_SECONDS = 4;

interface Replica {
  name: string;
  proc: ChildProcess;
  lines: Array<{ msg: string; time: number; [k: string]: unknown }>;
  exited: Promise<number | null>;
}

let api: FakeApiServer;
let db: TestDatabase;
let core: CoreV1Api;
let kc: KubeConfig;
let dir: string;
let projectId: string;
const masterKey = randomBytes(32).toString("base64");

const env = (name: string): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  KUBECONFIG: api.kubeconfigPath,
  FLOWSVC_DATABASE_URL: db.url,
  FLOWSVC_MASTER_KEY: masterKey,
  FLOWSVC_CONFIG_FILE: join(dir, "config.json"),
  FLOWSVC_POD_NAME: name,
  FLOWSVC_POD_NAMESPACE: "default",
  FLOWSVC_HEALTH_HOST: "127.0.0.1",
  FLOWSVC_HEALTH_PORT: "0",
});

const startReplica = (name: string, extraEnv: NodeJS.ProcessEnv = env(name)): Replica => {
  const proc = spawn(process.execPath, [CONTROLLER_MAIN], { env: extraEnv, stdio: ["ignore", "ignore", "pipe"] });
  const lines: Replica["lines"] = [];
  let buf = "";
  proc.stderr.setEncoding("utf8");
  proc.stderr.on("data", (d: string) => {
    buf += d;
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        lines.push(JSON.parse(line) as Replica["lines"][number]);
      } catch {
        lines.push({ msg: line, time: Date.now() });
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  return { name, proc, lines, exited };
};

const said = (r: Replica, msg: string): boolean => r.lines.some((l) => l.msg === msg);

const submit = (): Promise<string> =>
  withTransaction(db.pool, async (tx) => {
    const { id } = await createRun(tx, {
      projectId,
      source: "true\n",
      filename: "t.sh",
      trusted: true,
      trigger: { type: "manual", sender: "test" },
    });
    return (await tx.query<{ id: string }>(`select id from jobs where run_id = $1`, [id])).rows[0]!.id;
  });

/** The agent Pod of a job (Pending for ever: no kubelet runs here), once the leader made it. */
const podOf = async (jobId: string) => {
  let launchedBy: string | undefined;
  await waitFor(`a Pod for ${jobId}`, async () => {
    const pods = await core.listNamespacedPod({ namespace: "team-a", labelSelector: `flowsvc.io/job-id=${jobId}` });
    launchedBy = pods.items[0]?.metadata?.annotations?.["flowsvc.io/launched-by"];
    return launchedBy !== undefined;
  });
  return launchedBy;
};

before(async () => {
  api = await startFakeApiServer({ namespaces: ["default", "team-a"] });
  kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  core = kc.makeApiClient(CoreV1Api);
  // Every kind, as a chart install applies them: the leader starts the reconcilers, which watch them all.
  const crds = kc.makeApiClient(ApiextensionsV1Api);
  for (const body of flowCrds()) await crds.createCustomResourceDefinition({ body: body as V1CustomResourceDefinition });
  // The project is acme/team-a: the namespace says its org with the label, as the reconcilers read it.
  const ns = await core.readNamespace({ name: "team-a" });
  ns.metadata!.labels = { ...ns.metadata!.labels, "flowsvc.io/org": "acme" };
  await core.replaceNamespace({ name: "team-a", body: ns });
  db = await createTestDatabase();
  const orgId = mintId("org");
  projectId = mintId("prj");
  await db.pool.query(`insert into orgs (id, name) values ($1, 'acme')`, [orgId]);
  await db.pool.query(`insert into projects (id, org_id, name) values ($1, $2, 'team-a')`, [projectId, orgId]);
  dir = mkdtempSync(join(tmpdir(), "leader-test-"));
  writeFileSync(
    join(dir, "config.json"),
    JSON.stringify({
      agentServerUrl: "http://127.0.0.1:9",
      agent: { image: "ghcr.io/flowsvc/agent:test" },
      leaderElection: {
        leaseName: "flowsvc-controller",
        leaseDurationSeconds: LEASE_SECONDS,
        renewDeadlineSeconds: 2,
        retryPeriodSeconds: 0.25,
      },
    }),
  );
});
after(async () => {
  await db?.drop();
  await api?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("controller leader election", () => {
  test("only the Lease holder dispatches; after a kill -9 the standby takes over within the lease duration", async () => {
    const a = startReplica("ctl-a");
    let b: Replica | undefined;
    try {
      await waitFor("ctl-a to lead", () => said(a, "leading: reconcilers, dispatcher, timers and agent Pod launcher started"));
      b = startReplica("ctl-b");
      await waitFor("ctl-b to see ctl-a hold the lease", () =>
        b!.lines.some((l) => l.msg === "the lease is held by another replica" && l["holder"] === "ctl-a"),
      );
      const first = await submit();
      const story = (): string =>
        [a, b!]
          .map(
            (r) =>
              `${r.name}: ${r.lines.map((l) => `${l.time} ${l.msg}${l["err"] ? ` (${JSON.stringify(l["err"])})` : ""}${l["reason"] ? ` (${JSON.stringify(l["reason"])})` : ""}`).join("; ")}`,
          )
          .join("\n");
      const firstBy = await podOf(first).catch((err: Error) => assert.fail(`${err.message}\n${story()}`));
      assert.equal(firstBy, "ctl-a", story());
      assert.ok(!said(b, "became the leader"), "the standby never led while the leader lived");

      a.proc.kill("SIGKILL");
      const killedAt = Date.now();
      await a.exited;
      await waitFor("ctl-b to lead", () => said(b!, "leading: reconcilers, dispatcher, timers and agent Pod launcher started"));
      const tookOver = b.lines.find((l) => l.msg === "became the leader")!.time;
      assert.ok(tookOver - killedAt < (LEASE_SECONDS + 2) * 1000, `took over ${tookOver - killedAt} ms after the kill`);
      const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: "flowsvc-controller", namespace: "default" });
      assert.equal(lease.spec?.holderIdentity, "ctl-b");
      assert.equal(lease.spec?.leaseTransitions, 1);
      await waitFor("ctl-b to adopt ctl-a's Pod", () => b!.lines.some((l) => l.msg === "adopted an agent Pod" && l["jobId"] === first));
      assert.equal(await podOf(await submit()), "ctl-b");

      b.proc.kill("SIGTERM");
      assert.equal(await b.exited, 0);
      const released = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: "flowsvc-controller", namespace: "default" });
      assert.ok(!released.spec?.holderIdentity, `a stopped leader releases the lease\n${story()}`);
    } finally {
      a.proc.kill("SIGKILL");
      b?.proc.kill("SIGKILL");
    }
  });

  test("a leader whose Lease is stolen, then one whose renewals are refused, stops dispatching within renewDeadline and exits 1", async () => {
    const RENEW_DEADLINE_MS = 2000;
    const leases = kc.makeApiClient(CoordinationV1Api);
    const replicas = [startReplica("ctl-c"), startReplica("ctl-d")];
    const story = () => replicas.map((r) => `${r.name}: ${r.lines.map((l) => l.msg).join("; ")}`).join("\n");
    const failWithStory = (e: Error) => assert.fail(`${e.message}\n${story()}`);
    const lost = (r: Replica) => r.lines.find((l) => l.msg === "lost the lease; stopped leading");
    // A live replica that leads now. On a loaded host a replica may lose the Lease on its own while
    // it starts to lead (a renewal with no answer within 1 s, with these short settings): it then
    // exits 1 as designed, and another one is started to take its place.
    const leader = async (): Promise<Replica> => {
      const now = () =>
        replicas.find(
          (r) => r.proc.exitCode === null && said(r, "leading: reconcilers, dispatcher, timers and agent Pod launcher started") && !lost(r),
        );
      await waitFor(
        "a live leader",
        () => {
          if (replicas.every((r) => r.proc.exitCode !== null)) replicas.push(startReplica(`ctl-${replicas.length + 3}`));
          return now() !== undefined;
        },
        60_000,
      ).catch(failWithStory);
      return now()!;
    };
    /** How long after `since` the replica stepped down, by its own log, and its exit code. */
    const steppedDown = async (r: Replica, since: number) => {
      const code = await r.exited;
      const line = lost(r);
      assert.ok(line, `${r.name} says it lost the lease\n${story()}`);
      assert.equal(line["renewDeadlineMs"], RENEW_DEADLINE_MS);
      return { code, after: line.time - since };
    };
    try {
      const first = await leader();
      // Stolen: another holder writes the Lease (as a replica with a skewed view would); the leader's next renewal sees it.
      // Read-modify-write as any client does: a renewal between the read and the write is a 409, so read again.
      let stealing = true;
      while (stealing) {
        const lease = await leases.readNamespacedLease({ name: "flowsvc-controller", namespace: "default" });
        lease.spec = { ...lease.spec, holderIdentity: "thief", renewTime: new Date() };
        stealing = await leases.replaceNamespacedLease({ name: "flowsvc-controller", namespace: "default", body: lease }).then(
          () => false,
          (err: unknown) => {
            if ((err as { code?: number }).code !== 409) throw err;
            return true;
          },
        );
      }
      const stolen = await steppedDown(first, Date.now());
      assert.equal(stolen.code, 1, "a leader that lost its Lease exits 1");
      assert.ok(stolen.after < RENEW_DEADLINE_MS + 1000, `${first.name} stepped down ${stolen.after} ms after the steal`);
      const after = await leases.readNamespacedLease({ name: "flowsvc-controller", namespace: "default" });
      assert.notEqual(after.spec?.holderIdentity, first.name, "the old leader wrote nothing over the new holder");
      // The thief releases it (as a stopping leader does) unless the standby already took it over (a
      // lease duration after the steal, on a slow host): another replica leads at its next try.
      if (after.spec?.holderIdentity === "thief") {
        after.spec = { ...after.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: new Date() };
        await leases
          .replaceNamespacedLease({ name: "flowsvc-controller", namespace: "default", body: after })
          .catch((err: unknown) => assert.equal((err as { code?: number }).code, 409, String(err)));
      }
      const second = await leader();

      // Refused: the apiserver answers every Lease write 503; the leader must step down on its own clock.
      api.refuse((r) => r.method === "PUT" && r.path.includes("/leases/flowsvc-controller"));
      const refused = await steppedDown(second, Date.now());
      assert.equal(refused.code, 1);
      assert.ok(
        second.lines.some((l) => l.msg === "could not renew the lease"),
        "the failed renewals are logged",
      );
      assert.ok(refused.after < RENEW_DEADLINE_MS + 1000, `${second.name} stepped down ${refused.after} ms after the refusals began`);
    } finally {
      api.refuse(undefined);
      for (const r of replicas) r.proc.kill("SIGKILL");
    }
  });

  test("a controller without a master key, or with a bad value, refuses to start and names the variable", async () => {
    const { FLOWSVC_MASTER_KEY: _key, ...rest } = env("ctl-c");
    const r = startReplica("ctl-c", { ...rest, FLOWSVC_HEALTH_PORT: "99999" });
    assert.equal(await r.exited, 2);
    const text = r.lines.map((l) => l.msg).join("\n");
    assert.match(text, /FLOWSVC_MASTER_KEY: is required/);
    assert.match(text, /FLOWSVC_HEALTH_PORT: /);
  });
});
