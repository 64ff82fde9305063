import type { Pool, PoolClient } from "pg";
import {
  FlowError,
  formatSealedJournalValue,
  parseSealedJournalValue,
  stepOfSealName,
  stepSealName,
  type JournalEntry,
} from "@flowsvc/core";
import type { Keyring } from "./keyring.js";

type Db = Pool | PoolClient;

/** The project a run's sealed journal values belong to (the seal's AAD binds org and project). */
export interface JournalSealScope {
  orgId: string;
  projectId: string;
}

const sealAs = async (keyring: Keyring, scope: JournalSealScope, name: string, plaintext: string): Promise<string> => {
  const blob = await keyring.seal(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "journal", name }, plaintext);
  return formatSealedJournalValue({ name, base64: Buffer.from(blob).toString("base64") });
};

const openAs = async (keyring: Keyring, scope: JournalSealScope, name: string, base64: string): Promise<string> =>
  keyring.open(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "journal", name }, Buffer.from(base64, "base64"));

/** Where a step's result belongs: its run and its position in the run's journal. */
export interface StepPlace {
  readonly runId: string;
  readonly position: number;
}

/**
 * A step result that holds nothing the script printed: exactly `{stdout_b64: "", exit: <integer>}`
 * (an exit code cannot carry a secret). Anything more (an error text, another field) is sealed.
 */
const printedNothing = (result: unknown): boolean => {
  if (result === null || typeof result !== "object" || Array.isArray(result)) return false;
  const keys = Object.keys(result);
  const { stdout_b64, exit } = result as { stdout_b64?: unknown; exit?: unknown };
  return keys.length === 2 && stdout_b64 === "" && Number.isSafeInteger(exit);
};

/**
 * A step's result as stored: sealed, bound to its run and position (core/src/sealed-journal.ts).
 * A result that printed nothing is kept plain (it reads back as it is, like a row written before
 * sealing): nothing to hide, and no WebCrypto seal on the step's one round trip.
 */
export const sealStepResult = (keyring: Keyring, scope: JournalSealScope, step: StepPlace, result: unknown): Promise<unknown> =>
  printedNothing(result)
    ? Promise.resolve(result)
    : sealAs(keyring, scope, stepSealName(step.runId, step.position), JSON.stringify(result ?? null));

/** An activity's stdout (base64) as stored: sealed, bound to the activity. */
export const sealActivityOutput = async (
  keyring: Keyring,
  scope: JournalSealScope,
  activityId: string,
  stdoutB64: string,
): Promise<string> => sealAs(keyring, scope, activityId, stdoutB64);

/**
 * The run and the runs it was rerun from, newest first: a rerun keeps its source's sealed steps.
 * Each step up is a lookup by primary key (a lateral subquery fenced by `offset 0`): as a join of
 * runs to the recursion, the generic plan made while runs is small hashed a scan of every run at
 * each step (generic-plans.test.ts).
 */
export const runLineage = async (db: Db, runId: string): Promise<Set<string>> => {
  const { rows } = await db.query<{ id: string }>(
    `with recursive lineage(id, rerun_of, depth) as (
       select id, rerun_of, 0 from runs where id = $1
       union all
       select r.id, r.rerun_of, l.depth + 1 from lineage l
         cross join lateral (select r.id, r.rerun_of from runs r where r.id = l.rerun_of offset 0) r
        where l.depth < 1000
     ) select id from lineage`,
    [runId],
  );
  return new Set(rows.map((r) => r.id));
};

/**
 * A journal result as the script recorded it. A sealed step result opens only at its own position
 * and in its run or a run rerun from it; a sealed activity stdout opens by its activity. Plain
 * values (written before sealing, or results that are never sealed) come back as they are.
 */
export const openJournalResult = async (
  keyring: Keyring,
  scope: JournalSealScope,
  lineage: ReadonlySet<string>,
  entry: Pick<JournalEntry, "position" | "result">,
): Promise<unknown> => {
  const whole = parseSealedJournalValue(entry.result);
  if (whole) {
    const step = stepOfSealName(whole.name);
    if (!step || step.position !== entry.position || !lineage.has(step.runId)) {
      throw new FlowError(
        "internal",
        `the sealed result at call #${entry.position} was sealed for ${whole.name}, not for this run and position`,
      );
    }
    return JSON.parse(await openAs(keyring, scope, whole.name, whole.base64)) as unknown;
  }
  const r = entry.result;
  if (r === null || typeof r !== "object" || Array.isArray(r)) return r;
  const stdout = parseSealedJournalValue((r as { stdout_b64?: unknown }).stdout_b64);
  return stdout ? { ...r, stdout_b64: await openAs(keyring, scope, stdout.name, stdout.base64) } : r;
};

/** Every entry of a run's journal with its result opened (see openJournalResult). */
export const openJournal = async <E extends JournalEntry>(
  db: Db,
  keyring: Keyring,
  scope: JournalSealScope,
  journal: { readonly runId: string; readonly entries: readonly E[] },
): Promise<E[]> => {
  const { runId, entries } = journal;
  if (!entries.some((e) => sealedIn(e.result))) return [...entries];
  const lineage = await runLineage(db, runId);
  return Promise.all(entries.map(async (e) => ({ ...e, result: await openJournalResult(keyring, scope, lineage, e) })));
};

/** True when a result holds a sealed value (the whole of it, or an activity's stdout). */
export const sealedIn = (result: unknown): boolean =>
  parseSealedJournalValue(result) !== undefined ||
  (result !== null && typeof result === "object" && parseSealedJournalValue((result as { stdout_b64?: unknown }).stdout_b64) !== undefined);

/** Where a graph or pipeline node's output belongs: its run and its node id (the seal's AAD name `<run id>/<node id>`). */
export interface NodePlace {
  readonly runId: string;
  readonly nodeId: string;
}

const nodeOutputContext = (scope: JournalSealScope, place: NodePlace) => ({
  org: scope.orgId,
  project: scope.projectId,
  kind: "node-output" as const,
  // A run id never holds "/": the name is unambiguous whatever the node id.
  name: `${place.runId}/${place.nodeId}`,
});

/**
 * A node's exact output as kept beside its masked one (graph_nodes.output_sealed, migration 030):
 * the JSON text sealed with the org key, bound to the run and node, as base64.
 */
export const sealNodeOutput = async (keyring: Keyring, scope: JournalSealScope, place: NodePlace, output: unknown): Promise<string> =>
  Buffer.from(await keyring.seal(scope.orgId, nodeOutputContext(scope, place), JSON.stringify(output ?? null))).toString("base64");

/** A node's sealed output, opened; fails closed when it was sealed for another run, node, project or key. */
export const openNodeOutput = async (keyring: Keyring, scope: JournalSealScope, place: NodePlace, sealed: string): Promise<unknown> =>
  JSON.parse(await keyring.open(scope.orgId, nodeOutputContext(scope, place), Buffer.from(sealed, "base64"))) as unknown;
