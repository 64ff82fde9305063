/**
 * The hooks ingest verifies deliveries with, kept in memory: a delivery then costs no lookup
 * before its batch. A cached hook may be stale (rotated, re-keyed or removed, here or by another
 * replica), which is safe: the event is recorded only if the hook's rev is still the one it was
 * verified against (emitEvents, recordAlone), and otherwise the route forgets it and verifies
 * again; a delivery the cached copy refuses is verified again against the hook as it is (the
 * secret or key it was rotated to works at once on every replica).
 */
import type { Pool } from "pg";
import { findIngestHook, type IngestHook } from "@flowsvc/store";

const MAX_ENTRIES = 10_000;

export class HookCache {
  readonly #pool: Pool;
  readonly #hooks = new Map<string, IngestHook>();

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  /** The hook at (org, project, name) by name, from memory or Postgres; undefined when there is none. */
  async get(org: string, project: string, name: string): Promise<IngestHook | undefined> {
    const key = HookCache.#key(org, project, name);
    const hit = this.#hooks.get(key);
    if (hit) return hit;
    const hook = await findIngestHook(this.#pool, org, project, name);
    if (hook) {
      if (this.#hooks.size >= MAX_ENTRIES) this.#hooks.clear();
      this.#hooks.set(key, hook);
    }
    return hook;
  }

  /** The copy of the hook in memory (it may be stale), without a lookup; undefined when there is none. */
  cached(org: string, project: string, name: string): IngestHook | undefined {
    return this.#hooks.get(HookCache.#key(org, project, name));
  }

  /** After this replica changed the hook, or a delivery found its copy stale. */
  forget(org: string, project: string, name: string): void {
    this.#hooks.delete(HookCache.#key(org, project, name));
  }

  static #key(org: string, project: string, name: string): string {
    return `${org}\u001f${project}\u001f${name}`;
  }
}
