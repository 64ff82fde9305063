/**
 * `flow state` in a local run. Run-private values live in memory for the run's lifetime (a local
 * run never replays, so nothing needs to survive it). Entity values (`--entity <name>`) are shared
 * by every local run of this machine: one JSON file per entity under `<state>/entities/`, written
 * by rename, with each read-modify-write under the entity's lock queue (lock-queue.ts).
 */
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { StateAnswer } from "@flowsvc/agent";
import { FlowError } from "@flowsvc/core";
import type { StateRequest } from "@flowsvc/core";
import { fileSafeName, writeFileAtomic } from "./local-files.js";
import { acquireLock } from "./lock-queue.js";

type Values = Map<string, unknown>;

const answer = (values: Values, req: StateRequest): StateAnswer => {
  switch (req.op) {
    case "get":
      return values.has(req.key) ? { value: values.get(req.key), found: true } : { found: false };
    case "list":
      return { items: [...values].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([key, value]) => ({ key, value })) };
    case "set":
      values.set(req.key, req.value);
      return {};
    case "delete":
      values.delete(req.key);
      return {};
  }
};

export interface LocalStateOptions {
  readonly stateDir: string;
  readonly runId: string;
  /** Aborted when the run ends: a write waiting for the entity's lock gives up. */
  readonly signal: AbortSignal;
}

export class LocalState {
  readonly #private: Values = new Map();
  readonly #options: LocalStateOptions;

  constructor(options: LocalStateOptions) {
    this.#options = options;
  }

  async apply(req: StateRequest): Promise<StateAnswer> {
    if (req.entity === undefined) return answer(this.#private, req);
    const file = join(this.#options.stateDir, "entities", `${fileSafeName(req.entity)}.json`);
    if (req.op === "get" || req.op === "list") return answer(await readValues(file), req);
    const locksDir = join(this.#options.stateDir, "entity-locks");
    const lock = await acquireLock(locksDir, req.entity, this.#options.runId, this.#options.signal);
    try {
      const values = await readValues(file);
      const result = answer(values, req);
      await mkdir(join(this.#options.stateDir, "entities"), { recursive: true, mode: 0o700 });
      await writeFileAtomic(file, `${JSON.stringify({ entity: req.entity, values: Object.fromEntries(values) }, null, 2)}\n`);
      return result;
    } finally {
      await lock.release();
    }
  }
}

const readValues = async (file: string): Promise<Values> => {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return new Map();
    throw err;
  }
  try {
    const doc = JSON.parse(text) as { values?: Record<string, unknown> };
    return new Map(Object.entries(doc.values ?? {}));
  } catch (err) {
    throw new FlowError("internal", `the local state file ${file} is not valid JSON: fix or delete it`, { cause: err });
  }
};
