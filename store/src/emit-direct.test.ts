/**
 * emitToHandlers on a real Postgres: a person's emit that script handlers take, in one round trip
 * (migration 022), its jobs dispatched to the slots a dispatcher lends it; and every case it cannot
 * see going the transactional way with the same outcome, nothing written twice.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import { FlowError, lifecyclePayload } from "@flowsvc/core";
import { createTestDatabase, createTestProject, waitFor, type TestDatabase } from "./testing.js";
import { withTransaction } from "./pool.js";
import { digestToken, mintToken } from "./mint.js";
import { emitBatch, emitToHandlers, handlerRunId, type DispatchSlot, type DispatchSlots, type EmitInput, type EmitResult } from "./emit.js";
import { GroupCommitter } from "./group-commit.js";
import { performCall } from "./calls.js";
import { claimByToken, claimReadyJobs, requeueJobAttempt } from "./jobs.js";
import { getRunInternalInProject } from "./runs.js";

let db: TestDatabase;
/** NOTIFY payloads on flowsvc_jobs, in commit order. */
const notified: string[] = [];
let listener: pg.Client;

before(async () => {
  db = await createTestDatabase();
  listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  listener.on("notification", (n) => n.channel === "flowsvc_jobs" && notified.push(n.payload ?? ""));
  await listener.query("listen flowsvc_jobs");
});
after(async () => {
  await listener?.end();
  await db?.drop();
});

/** A dispatcher's slots as the emit sees them: `free` of them, each launch and release recorded. */
class Slots implements DispatchSlots {
  readonly launched: Array<{ jobId: string; runId: string; org: string; project: string; token: string; committed: boolean }> = [];
  released = 0;
  constructor(public free: number) {}
  reserve(capabilities: readonly string[]): DispatchSlot | undefined {
    assert.deepEqual(capabilities, ["polyglot"], "a handler run's job needs polyglot");
    if (this.free <= 0) return undefined;
    this.free--;
    const { token, digest } = mintToken("job");
    return {
      digest,
      leaseMs: 60_000,
      // Launched once committed: another connection sees the job dispatched with this token.
      launch: (job) => {
        this.launched.push({ ...job, token, committed: false });
        const entry = this.launched.at(-1)!;
        void db.pool
          .query<{ status: string }>(`select status from jobs where id = $1 and token_digest = $2`, [job.jobId, digest])
          .then(({ rows }) => (entry.committed = rows[0]?.status === "dispatched"));
      },
      release: () => {
        this.free++;
        this.released++;
      },
    };
  }
}

const committerWith = (slots: DispatchSlots) =>
  new GroupCommitter<EmitInput, EmitResult>(db.pool, emitBatch.apply, {
    begin: emitBatch.begin,
    alone: (c, inputs) => emitToHandlers(c, inputs, slots),
  });

const newProject = async () => {
  const { projectId, orgId } = await createTestProject(db.pool);
  return { projectId, input: (over: Partial<EmitInput> = {}): EmitInput => ({ ...base(projectId, orgId), ...over }) };
};
const base = (projectId: string, org: string): EmitInput => ({
  projectId,
  type: "e",
  key: null,
  payload: null,
  sourceRunId: null,
  trusted: true,
  placement: { org, project: "p" },
});

const addHandler = (projectId: string, name: string, on: string[], more: { when?: string; credentials?: Record<string, string> } = {}) =>
  db.pool.query(`insert into handlers (project_id, name, patterns, when_cel, reaction, credentials) values ($1, $2, $3, $4, $5, $6)`, [
    projectId,
    name,
    on,
    more.when ?? null,
    JSON.stringify({ kind: "script", source: "echo hi\n", filename: "h.sh" }),
    JSON.stringify(more.credentials ?? {}),
  ]);

const count = async (table: "events" | "runs", projectId: string): Promise<number> =>
  (await db.pool.query<{ n: number }>(`select count(*)::int as n from ${table} where project_id = $1`, [projectId])).rows[0]!.n;

const jobOf = async (runId: string) =>
  (
    await db.pool.query<{
      id: string;
      status: string;
      attempt: number;
      token_digest: Buffer | null;
      capabilities: string[];
      lease_s: number | null;
    }>(
      `select id, status, attempt, token_digest, capabilities, extract(epoch from lease_expires_at - now())::float8 as lease_s from jobs where run_id = $1`,
      [runId],
    )
  ).rows;

void test("a person's emit that script handlers take is one round trip: event, runs, jobs dispatched to free slots and launched once committed", async () => {
  const { projectId: p, input } = await newProject();
  await addHandler(p, "a", ["e"], { credentials: { TOKEN: "gh" } });
  await addHandler(p, "b", ["e"], { when: "event.payload.n > 1" });
  await addHandler(p, "c", ["other"]);
  const slots = new Slots(1);
  const gc = committerWith(slots);
  // The project's handlers are not known yet: the first emit reads them in a transaction (and queues its jobs).
  const first = await gc.submit(input({ payload: { n: 1 } }));
  assert.equal(gc.stats.alone, 0);
  assert.deepEqual(first.handlerRuns, [handlerRunId(first.eventId, "a")]);

  const second = await gc.submit(input({ key: "k", payload: { n: 2 } }));
  assert.equal(gc.stats.alone, 1, "one statement, its commit included");
  const [a, b] = [handlerRunId(second.eventId, "a"), handlerRunId(second.eventId, "b")];
  assert.deepEqual(second.handlerRuns, [a, b]);
  assert.equal(second.wake, b < a ? b : a, "one job had no slot: it is queued, and the dispatcher is woken for it");

  const { rows: runs } = await db.pool.query(
    `select id, status, handler_name, event_id, generation, trusted, interpreter, trigger, credentials from runs where event_id = $1 order by handler_name`,
    [second.eventId],
  );
  assert.deepEqual(runs, [
    {
      id: a,
      status: "queued",
      handler_name: "a",
      event_id: second.eventId,
      generation: 1,
      trusted: true,
      interpreter: ["bash", "-eu"],
      trigger: { type: "e", event: second.eventId, key: "k" },
      credentials: { TOKEN: "gh" },
    },
    {
      id: b,
      status: "queued",
      handler_name: "b",
      event_id: second.eventId,
      generation: 1,
      trusted: true,
      interpreter: ["bash", "-eu"],
      trigger: { type: "e", event: second.eventId, key: "k" },
      credentials: {},
    },
  ]);
  const { rows: events } = await db.pool.query(`select id, type, key, payload, generation, trusted from events where id = $1`, [
    second.eventId,
  ]);
  assert.deepEqual(events, [{ id: second.eventId, type: "e", key: "k", payload: { n: 2 }, generation: 0, trusted: true }]);

  // The first run planned (handler a) took the slot: dispatched at attempt 1 with the slot's token, and launched.
  const [jobA] = await jobOf(a);
  assert.equal(slots.launched.length, 1);
  const launch = slots.launched[0]!;
  assert.deepEqual(
    { ...launch, token: undefined, committed: undefined },
    { jobId: jobA!.id, runId: a, org: input().placement!.org, project: "p", token: undefined, committed: undefined },
  );
  assert.deepEqual([jobA!.status, jobA!.attempt, jobA!.capabilities], ["dispatched", 1, ["polyglot"]]);
  assert.deepEqual(jobA!.token_digest, digestToken(launch.token));
  assert.ok(jobA!.lease_s! > 30 && jobA!.lease_s! <= 60, `lease of the slot, ${jobA!.lease_s} s left`);
  await waitFor("the launched job read back", () => launch.committed);
  const [jobB] = await jobOf(b);
  assert.deepEqual([jobB!.status, jobB!.attempt, jobB!.token_digest], ["queued", 0, null]);

  // With a slot for every job, nothing is announced: no NOTIFY, no wake.
  slots.free = 2;
  const third = await gc.submit(input({ payload: { n: 3 } }));
  assert.equal(third.wake, undefined);
  assert.deepEqual(
    (await Promise.all(third.handlerRuns.map(jobOf))).flat().map((j) => j.status),
    ["dispatched", "dispatched"],
  );
  const fourth = await gc.submit(input({ payload: { n: 0 } })); // b declines n=0; a has no slot left
  assert.equal(fourth.wake, handlerRunId(fourth.eventId, "a"));
  await waitFor("the fourth emit's NOTIFY", () => notified.includes(fourth.wake!));
  for (const r of third.handlerRuns) assert.ok(!notified.includes(r), "a batch whose jobs all went to slots sends no NOTIFY");
  assert.equal(gc.stats.alone, 3);
  assert.equal(slots.released, 0);
  await gc.close();
});

void test("what the one round trip cannot see goes the transactional way, with the same outcome; its slots are released", async () => {
  const { projectId: p, input } = await newProject();
  await addHandler(p, "h", ["e"], { when: "event.payload.missing == 1" });
  const slots = new Slots(4);
  const gc = committerWith(slots);
  const declined = await gc.submit(input({ payload: {} })); // caches the handlers
  assert.equal(declined.declined.length, 1, "a when that cannot be evaluated declines, reported");
  const alone = gc.stats.alone;
  assert.equal((await gc.submit(input({ payload: {} }))).declined.length, 1);
  assert.equal(gc.stats.alone, alone + 1, "declined the same way in one round trip");

  // The handlers changed since they were cached: declined, and the transactional way sees the new ones.
  await db.pool.query(`update handlers set when_cel = null where project_id = $1`, [p]);
  const changed = await gc.submit(input());
  assert.equal(changed.handlerRuns.length, 1);
  assert.equal(gc.stats.alone, alone + 1);
  assert.deepEqual([slots.launched.length, slots.free], [0, 4]);

  // A parked waiter of the type gets the event (the transactional way delivers it).
  const waiter = (await gc.submit(input())).handlerRuns[0]!;
  await db.pool.query(`update runs set status = 'running' where id = $1`, [waiter]);
  await withTransaction(db.pool, (tx) => performCall(tx, waiter, { position: 0, kind: "wait-event", name: "e", ordinal: 0, args: {} }));
  const woke = await gc.submit(input({ payload: "for the waiter" }));
  const done = await withTransaction(db.pool, (tx) =>
    performCall(tx, waiter, { position: 0, kind: "wait-event", name: "e", ordinal: 0, args: {} }),
  );
  assert.equal((done.entry.result as { envelope: { event: string } }).envelope.event, woke.eventId);

  // A live run that cancels on the type: another subject leaves it, its own subject cancels it
  // (the transactional way, which cancels in the emit's transaction).
  const keyed = (await gc.submit(input({ key: "k1" }))).handlerRuns[0]!;
  await db.pool.query(`update runs set cancel_on = '{e}' where id = $1`, [keyed]);
  const statusOf = async (id: string) =>
    (await db.pool.query<{ status: string }>(`select status from runs where id = $1`, [id])).rows[0]?.status;
  await gc.submit(input({ key: "k2" }));
  assert.equal(await statusOf(keyed), "queued", "an event of another subject does not cancel it");
  const direct = gc.stats.alone;
  await gc.submit(input({ key: "k1" }));
  assert.equal(await statusOf(keyed), "cancelled", "an event of its subject cancels it");
  assert.equal(gc.stats.alone, direct, "it went the transactional way");

  // Over the limit of handler runs in flight: refused with the limit's message, nothing recorded.
  for (let i = (await count("runs", p)) - 1; i < 16; i++) await gc.submit(input()); // the cancelled run is not in flight
  const [events, runs] = [await count("events", p), await count("runs", p)];
  slots.free = 4;
  const launched = slots.launched.length;
  await assert.rejects(gc.submit(input()), /16 handler runs are in flight in this project \(at most 16\)/);
  // NUL in the payload: refused before anything is written, whichever way.
  await assert.rejects(
    gc.submit(input({ payload: "a\u0000b" })),
    (err: unknown) => err instanceof FlowError && /NUL characters/.test(err.message),
  );
  assert.deepEqual([await count("events", p), await count("runs", p)], [events, runs], "nothing half-written");
  assert.ok(slots.released >= 1);
  assert.deepEqual([slots.launched.length, slots.free], [launched, 4], "every slot reserved for a refused emit was released");
  await gc.close();
});

void test("concurrent emits in one round trip never pass the in-flight limit together: of 12 at once with 10 in flight, exactly 6 start a run", async () => {
  const { projectId: p, input } = await newProject();
  await addHandler(p, "slow", ["e"]);
  const slots = new Slots(100);
  const gc = committerWith(slots);
  for (let i = 0; i < 10; i++) await gc.submit(input());
  const outcomes = await Promise.allSettled(Array.from({ length: 12 }, () => gc.submit(input())));
  const refused = outcomes.filter((o) => o.status === "rejected");
  assert.equal(refused.length, 6, outcomes.map((o) => o.status).join(" "));
  assert.equal(await count("runs", p), 16);
  assert.equal(slots.launched.length + slots.free, 100, "every slot was launched or released");
  await gc.close();
});

/** A run's `run.started` events. */
const startedEvents = async (runId: string) =>
  (
    await db.pool.query<{ id: string; key: string | null; payload: unknown; trusted: boolean; generation: number; created_at: Date }>(
      `select id, key, payload, trusted, generation, created_at from events where source_run_id = $1 and type = 'run.started'`,
      [runId],
    )
  ).rows;
const runOf = async (runId: string) =>
  (await db.pool.query<{ status: string; started_at: Date | null }>(`select status, started_at from runs where id = $1`, [runId])).rows[0]!;
/** The run's lifecycle payload as the transactional start makes it from the run as it is now (core's lifecyclePayload). */
const payloadNow = async (runId: string, publicUrl: string | undefined) => {
  const now = (await getRunInternalInProject(db.pool, runId))!;
  return lifecyclePayload({ ...now.run, org: now.org, project: now.project }, {}, publicUrl);
};

void test("a handler run's claim with the token its emit dispatched starts the job and the run in the claim's one statement, run.started as the start transaction writes it; a re-claim starts nothing twice; a lost token, a run with credentials start nothing", async () => {
  const { projectId: p, input } = await newProject();
  await addHandler(p, "h", ["e"]);
  await addHandler(p, "creds", ["e"], { credentials: { TOKEN: "gh" } });
  const slots = new Slots(8);
  const gc = committerWith(slots);
  const queued = await gc.submit(input({ payload: { n: 0 } })); // caches the handlers (the transactional way: jobs queued)
  const emitted = await gc.submit(input({ key: "k", payload: { n: 1 } }));
  const [h, creds] = [handlerRunId(emitted.eventId, "h"), handlerRunId(emitted.eventId, "creds")];
  const tokenOf = (runId: string) => digestToken(slots.launched.find((l) => l.runId === runId)!.token);
  const claimOf = (runId: string) =>
    claimByToken(db.pool, { digest: tokenOf(runId), agentId: "agent-1", leaseMs: 30_000, publicUrl: "https://flow.example/" });

  const claimed = await claimOf(h);
  assert.equal(claimed?.started, true);
  assert.deepEqual([claimed.job.status, claimed.run?.id, claimed.reads.event?.id], ["dispatched", h, emitted.eventId], "read as it was");
  const [job] = await db.pool
    .query<{ status: string; agent_id: string; lease_s: number }>(
      `select status, agent_id, extract(epoch from lease_expires_at - now())::float8 as lease_s from jobs where run_id = $1`,
      [h],
    )
    .then((r) => r.rows);
  assert.deepEqual([job!.status, job!.agent_id], ["running", "agent-1"]);
  assert.ok(job!.lease_s > 15 && job!.lease_s <= 30, `the claim's lease, ${job!.lease_s} s left`);
  const run = await runOf(h);
  assert.equal(run.status, "running");
  const [event, ...more] = await startedEvents(h);
  assert.equal(more.length, 0);
  assert.deepEqual(event!.payload, await payloadNow(h, "https://flow.example/"));
  assert.match(String((event!.payload as { run_url: string }).run_url), /^https:\/\/flow\.example\/runs\/run-/);
  assert.deepEqual([event!.key, event!.trusted, event!.generation], ["k", true, 0]);
  assert.deepEqual(run.started_at, event!.created_at, "started_at is the claim statement's time, as is its event's");

  // The agent claims again (its answer was lost): the job is its own, nothing starts twice.
  const again = await claimOf(h);
  assert.deepEqual([again?.started, again?.job.status], [false, "running"]);
  assert.equal((await startedEvents(h)).length, 1);

  // A run that declares credentials is not started by the lookup: they resolve (or fail the job) first.
  const withCreds = await claimOf(creds);
  assert.deepEqual([withCreds?.started, (await runOf(creds)).status, (await startedEvents(creds)).length], [false, "queued", 0]);

  // A handler run's job that the dispatcher claimed (the first emit's, queued) has its hint from that dispatch.
  const tokens = new Map<string, string>();
  const dispatched = await claimReadyJobs(db.pool, {
    limit: 50,
    leaseMs: 30_000,
    capabilities: ["polyglot"],
    mintDigest: () => {
      const { token, digest } = mintToken("job");
      tokens.set(digest.toString("hex"), token);
      return digest;
    },
  });
  const viaDispatcher = (runId: string) => dispatched.find((j) => j.run_id === runId)!.digest;
  const [queuedH, queuedCreds] = [handlerRunId(queued.eventId, "h"), handlerRunId(queued.eventId, "creds")];
  const fromDispatch = await claimByToken(db.pool, {
    digest: viaDispatcher(queuedH),
    agentId: "agent-2",
    leaseMs: 30_000,
    publicUrl: undefined,
  });
  assert.deepEqual([fromDispatch?.started, (await runOf(queuedH)).status, (await startedEvents(queuedH)).length], [true, "running", 1]);
  assert.deepEqual((await startedEvents(queuedH))[0]!.payload, await payloadNow(queuedH, undefined));
  const credsDispatched = await claimByToken(db.pool, {
    digest: viaDispatcher(queuedCreds),
    agentId: "agent-2",
    leaseMs: 30_000,
    publicUrl: undefined,
  });
  assert.deepEqual([credsDispatched?.started, (await runOf(queuedCreds)).status], [false, "queued"]);

  // A token whose job went back to the queue starts nothing.
  const next = await gc.submit(input({ payload: { n: 2 } }));
  const lost = handlerRunId(next.eventId, "h");
  const [lostJob] = await jobOf(lost);
  assert.equal(await requeueJobAttempt(db.pool, lostJob!.id, 1), true);
  assert.equal(await claimOf(lost), undefined);
  assert.deepEqual(
    [(await runOf(lost)).status, (await startedEvents(lost)).length, (await jobOf(lost))[0]!.status],
    ["queued", 0, "queued"],
  );
  await gc.close();
});
