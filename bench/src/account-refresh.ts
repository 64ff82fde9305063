/**
 * Connected-account renewal under a race: 1,000 accounts whose tokens expire in the same minute, two
 * renewal loops in two processes (as two replicas, or a leader hand-over, would run them) over one
 * Postgres, against the OAuth provider peer with rotating refresh tokens and family revocation on
 * reuse. Prints the refreshes the provider served (target: exactly 1,000), the refresh tokens it
 * was sent twice (target: none: with reuse detection one would revoke the grant), each loop's share,
 * and the wall time. Asserts nothing.
 */
import { fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { parseAccountProviders } from "@flowsvc/core";
import { Keyring, createPool, createTestDatabase, createTestProject, mintId, saveGrantedAccount } from "@flowsvc/store";
import { renewDueAccounts, type RenewalResult } from "@flowsvc/controller";
import { OAuthProviderPeer } from "@flowsvc/test/peers/oauth-provider";

const ACCOUNTS = 1000;
const REDIRECT = "http://127.0.0.1:1/oauth/callback";

interface WorkerArgs {
  url: string;
  masterKey: string;
  providers: string;
  holder: string;
}

/** One renewal loop: passes until nothing is due; prints what came of each account it touched. */
const worker = async (a: WorkerArgs): Promise<void> => {
  const pool = createPool(a.url, { max: 10 });
  const keyring = await Keyring.create(pool, Buffer.from(a.masterKey, "base64"));
  const deps = {
    pool,
    keyring,
    providers: parseAccountProviders(a.providers, REDIRECT).providers,
    log: { error: (obj: Record<string, unknown>, msg: string) => process.stderr.write(`${msg}: ${String(obj["err"])}\n`) },
    concurrency: 8,
    batch: 200,
  };
  const tally: Partial<Record<RenewalResult, number>> = {};
  for (;;) {
    const results = await renewDueAccounts(deps, a.holder);
    for (const r of results) tally[r] = (tally[r] ?? 0) + 1;
    if (results.length === 0) break;
  }
  await pool.end();
  process.stdout.write(`${JSON.stringify({ holder: a.holder, tally })}\n`);
};

const runWorker = (args: WorkerArgs): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = fork(import.meta.filename, ["worker", JSON.stringify(args)], { stdio: ["ignore", "pipe", "inherit", "ipc"] });
    let out = "";
    child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    child.on("exit", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`worker ${args.holder} exited ${code}`))));
  });

const main = async (): Promise<void> => {
  const peer = await new OAuthProviderPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 3600 }).start();
  const db = await createTestDatabase();
  const masterKey = randomBytes(32);
  try {
    const keyring = await Keyring.create(db.pool, masterKey);
    const scope = await createTestProject(db.pool);
    await db.pool.query(`insert into org_keys (org_id, wrapped) values ($1, $2)`, [
      scope.orgId,
      Buffer.from(await keyring.newWrappedOrgKey(scope.orgId)),
    ]);
    const userId = mintId("usr");
    await db.pool.query(`insert into users (id, name) values ($1, 'bench')`, [userId]);
    const expiresAtMs = Date.now() + 30_000;
    for (let i = 0; i < ACCOUNTS; i++)
      await saveGrantedAccount(db.pool, keyring, {
        scope,
        name: `acct-${i}`,
        provider: "bench",
        farId: String(i),
        farLabel: `user-${i}`,
        granterId: userId,
        tokens: peer.mintGrant({ id: i, login: `user-${i}` }),
        expiresAtMs,
        // All due within the same minute.
        refreshAfterMs: Date.now() - Math.floor(Math.random() * 60_000),
      });
    const providers = JSON.stringify([peer.providerConfig("bench")]);
    const started = performance.now();
    const outs = await Promise.all(
      ["loop-a", "loop-b"].map((holder) => runWorker({ url: db.url, masterKey: masterKey.toString("base64"), providers, holder })),
    );
    const wallMs = performance.now() - started;
    const { rows } = await db.pool.query<{ status: string; n: string }>(
      `select status, count(*) as n from accounts group by status order by status`,
    );
    console.log(`accounts: ${ACCOUNTS}, two renewal processes, provider rotates refresh tokens and revokes the family on reuse`);
    console.log(`refreshes served by the provider: ${peer.refreshesServed} (target ${ACCOUNTS})`);
    console.log(`refresh tokens sent twice: ${peer.presentedTwice().length} (target 0)`);
    for (const o of outs) console.log(`loop ${o}`);
    console.log(`statuses after: ${rows.map((r) => `${r.status}=${r.n}`).join(", ")}`);
    console.log(`wall: ${(wallMs / 1000).toFixed(2)} s (${(ACCOUNTS / (wallMs / 1000)).toFixed(0)} refreshes/s)`);
  } finally {
    await db.drop();
    await peer.close();
  }
};

if (process.argv[2] === "worker") await worker(JSON.parse(process.argv[3]!) as WorkerArgs);
else await main();
