/**
 * Test-only: the ingest app on a real test Postgres (store's createTestDatabase), for route tests
 * with `app.inject()`: no server process, no port. Not exported from the package's index.
 *
 * The deps are built as `flow server` builds them (cli/src/server/run-server.ts): a keyring on a
 * fresh master key, a LISTEN connection, a lease. Two projects in two orgs, each org with its data
 * key: `project`, where users of each role have a token, and `other`, where only `outsider` (its
 * admin) does, so a route can be asked for another project's resource.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { FastifyBaseLogger, FastifyInstance, InjectOptions, LightMyRequestResponse } from "fastify";
import { pino } from "pino";
import {
  Keyring,
  claimReadyJobs,
  createPgResourceStore,
  createTestDatabase,
  createTestProject,
  createUserWithToken,
  mintId,
  mintToken,
  saveGrantedAccount,
  startListener,
  type Listener,
  type Role,
  type TestDatabase,
} from "@flowsvc/store";
import { buildApp } from "../app.js";

/** Every route the app registered (the OpenAPI catalog's list): for tests that hold a list of paths against it. */
export { registeredRoutes } from "../openapi/document.js";
import type { AccountProvidersConfig, AccountStatus } from "@flowsvc/core";

export const TEST_LEASE_MS = 60_000;

export interface TestProject {
  org: string;
  project: string;
  orgId: string;
  projectId: string;
  /** `/api/v1/orgs/{org}/projects/{project}` */
  base: string;
}

export type TestCaller = Role | "outsider" | "none";

export interface TestApp {
  app: FastifyInstance;
  db: TestDatabase;
  keyring: Keyring;
  project: TestProject;
  other: TestProject;
  /** A user API token per role on `project`; `outsider` is admin of `other` only. */
  tokens: Record<Role | "outsider", string>;
  close(): Promise<void>;
}

/** A project whose org has a data key (secrets and sealed journal entries need it). */
const keyedProject = async (db: TestDatabase, keyring: Keyring): Promise<TestProject> => {
  const { projectId, orgId } = await createTestProject(db.pool);
  await db.pool.query(`insert into org_keys (org_id, wrapped) values ($1, $2)`, [
    orgId,
    Buffer.from(await keyring.newWrappedOrgKey(orgId)),
  ]);
  // createTestProject names the org after its id and the project `p`.
  return { org: orgId, project: "p", orgId, projectId, base: `/api/v1/orgs/${orgId}/projects/p` };
};

const userToken = async (db: TestDatabase, projectId: string, name: string, role: Role): Promise<string> => {
  const t = mintToken("flw");
  await createUserWithToken(db.pool, { userId: mintId("usr"), tokenId: mintId("tok") }, { name, projectId, role, tokenDigest: t.digest });
  return t.token;
};

/** The app on a database of its own. Call close() when done (the app, the listener, then the database). */
export const createTestApp = async (
  opts: { publicUrl?: string; logger?: FastifyBaseLogger; accounts?: AccountProvidersConfig } = {},
): Promise<TestApp> => {
  const db = await createTestDatabase();
  const keyring = await Keyring.create(db.pool, randomBytes(32));
  const project = await keyedProject(db, keyring);
  const other = await keyedProject(db, keyring);
  const tokens = {
    viewer: await userToken(db, project.projectId, "vera", "viewer"),
    member: await userToken(db, project.projectId, "mo", "member"),
    admin: await userToken(db, project.projectId, "ada", "admin"),
    outsider: await userToken(db, other.projectId, "olga", "admin"),
  };
  const listener: Listener = startListener(db.url, () => {});
  const resources = createPgResourceStore(db.pool, keyring);
  const app = buildApp(
    { pool: db.pool, keyring, resources, listener, publicUrl: opts.publicUrl, leaseMs: TEST_LEASE_MS, accounts: opts.accounts },
    opts.logger ?? pino({ level: "silent" }),
  );
  await app.ready();
  const close = async (): Promise<void> => {
    await app.close();
    await listener.close();
    await db.drop();
  };
  return { app, db, keyring, project, other, tokens, close };
};

export interface Ask extends Omit<InjectOptions, "url" | "method" | "body" | "payload"> {
  /** Who calls: a role's token, `outsider`, `none` (no Authorization header), or a token string. */
  as?: TestCaller | { token: string };
  /** A value sent as JSON, or a string / Buffer sent as is (with content-type application/json unless headers say otherwise). */
  body?: unknown;
}

export interface Answer {
  status: number;
  body: unknown;
  text: string;
  /** The `{error: {code, message}}` of a refusal. */
  error: { code: string; message: string; hint?: string; details?: Record<string, unknown> } | undefined;
  res: LightMyRequestResponse;
}

const tokenOf = (t: TestApp, as: Ask["as"]): string | undefined => {
  if (as === undefined) return t.tokens.member;
  if (typeof as === "object") return as.token;
  return as === "none" ? undefined : t.tokens[as];
};

const payloadOf = (body: unknown): string | Buffer | undefined => {
  if (body === undefined) return undefined;
  return typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body);
};

const parsed = (text: string): unknown => {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
};

/** One request through `app.inject()`, as `as` (a member by default). */
export const ask = async (t: TestApp, method: InjectOptions["method"], url: string, opts: Ask = {}): Promise<Answer> => {
  const { as, body, headers, ...rest } = opts;
  const token = tokenOf(t, as);
  const payload = payloadOf(body);
  const res = await t.app.inject({
    ...rest,
    method,
    url,
    headers: {
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...(payload === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(payload === undefined ? {} : { payload }),
  });
  const value = parsed(res.body);
  const error = (value as { error?: Answer["error"] } | undefined)?.error;
  return { status: res.statusCode, body: value, text: res.body, error, res };
};

export interface TestJob {
  runId: string;
  jobId: string;
  /** The job token an agent presents on /agent/v1. */
  token: string;
}

/**
 * Dispatches the queued job of `runId` (its run's, or with `activity` its activity's) as the
 * dispatcher does (store claimReadyJobs) and returns its job token. Fails if another job is older
 * in the queue: each test file has its own database, and its tests dispatch what they queue.
 */
export const dispatchJob = async (t: TestApp, runId: string, kind: "run" | "activity" = "run"): Promise<TestJob> => {
  const { rows } = await t.db.pool.query<{ id: string; capabilities: string[] }>(
    `select id, capabilities from jobs where run_id = $1 and kind = $2 and status = 'queued' order by created_at limit 1`,
    [runId, kind],
  );
  const queued = rows[0];
  if (!queued) throw new Error(`no queued ${kind} job for run ${runId}`);
  const { token, digest } = mintToken("job");
  const [claimed] = await claimReadyJobs(t.db.pool, {
    limit: 1,
    leaseMs: TEST_LEASE_MS,
    capabilities: queued.capabilities,
    mintDigest: () => digest,
  });
  if (claimed?.id !== queued.id)
    throw new Error(`dispatched job ${claimed?.id ?? "(none)"}, not ${queued.id}: dispatch each job a test queues`);
  return { runId, jobId: queued.id, token };
};

/** A script run submitted through the API by a member, and its job dispatched. */
export const startScriptJob = async (t: TestApp, source = "echo hi\n"): Promise<TestJob> => {
  const res = await ask(t, "POST", `${t.project.base}/runs`, { body: { kind: "script", source, filename: "job.sh" } });
  if (res.status !== 201) throw new Error(`submit answered ${res.status}: ${res.text}`);
  return dispatchJob(t, (res.body as { id: string }).id);
};

/** `[[[...]]]` `depth` deep, as JSON text. */
export const deepJson = (depth: number): string => "[".repeat(depth) + "]".repeat(depth);

const USER_OF: Record<Role, string> = { viewer: "vera", member: "mo", admin: "ada" };
const BELOW: Record<Role, Role | undefined> = { viewer: undefined, member: "viewer", admin: "member" };

/**
 * The refusals every `/api/v1` project route makes before it reads its input: no token and a token
 * the server never minted (401), a role below `need` (403, naming both roles), and a caller who is
 * no member of the project (404, as if it did not exist).
 */
export const assertCallerRefusals = async (
  t: TestApp,
  request: { method: InjectOptions["method"]; url: string; body?: unknown },
  need: Role,
): Promise<void> => {
  const { method, url, body } = request;
  const none = await ask(t, method, url, { as: "none", body });
  assertError(none, 401, /no API token was sent \(Authorization: Bearer <token>\)/, `${method} ${url} without a token`);
  const forged = await ask(t, method, url, { as: { token: `flw_${"A".repeat(43)}` }, body });
  assertError(forged, 401, /the API token is not valid for this server/, `${method} ${url} with a forged token`);
  const below = BELOW[need];
  if (below !== undefined) {
    const low = await ask(t, method, url, { as: below, body });
    assertError(
      low,
      403,
      new RegExp(`this needs the ${need} role on ${t.project.org}/p; ${USER_OF[below]} is ${below}`),
      `${method} ${url} as ${below}`,
    );
  }
  const outsider = await ask(t, method, url, { as: "outsider", body });
  assertError(outsider, 404, new RegExp(`project ${t.project.org}/p not found`), `${method} ${url} as a non-member`);
};

/** An error answer: its status, its code's family and its message. */
export const assertError = (res: Answer, status: number, message: RegExp, what = "the request"): void => {
  if (res.status !== status || !message.test(res.error?.message ?? "")) {
    assert.fail(`${what}: expected ${status} matching ${message}, got ${res.status}: ${res.text.slice(0, 500)}`);
  }
};

/** Rows in `table` (a test asserts a refusal wrote none). */
export const countRows = async (t: TestApp, table: string): Promise<number> =>
  Number((await t.db.pool.query<{ n: string }>(`select count(*) as n from ${table}`)).rows[0]!.n);

/**
 * A connected account stored in `project` under `name` as a connect would store it (granted by
 * `granter`, a user name, `ada` the admin unless told, with `accessToken`), then put in `status` as
 * renewal or a granter leaving would.
 */
export const connectTestAccount = async (
  t: TestApp,
  a: { name: string; status: AccountStatus; accessToken?: string; provider?: string; granter?: string },
): Promise<void> => {
  const { rows } = await t.db.pool.query<{ id: string }>(`select id from users where name = $1`, [a.granter ?? "ada"]);
  await saveGrantedAccount(t.db.pool, t.keyring, {
    scope: { orgId: t.project.orgId, projectId: t.project.projectId },
    name: a.name,
    provider: a.provider ?? "gh",
    farId: `far-${a.name}`,
    farLabel: `label-${a.name}`,
    granterId: rows[0]!.id,
    tokens: { access_token: a.accessToken ?? `tok-${a.name}` },
    expiresAtMs: null,
    refreshAfterMs: null,
  });
  await t.db.pool.query(`update accounts set status = $3 where project_id = $1 and name = $2`, [t.project.projectId, a.name, a.status]);
};
