import { randomBytes } from "node:crypto";
import type { Pool } from "pg";
import { FlowError, importAesKey, openValue, sealValue, unwrapOrgKey, wrapOrgKey, type SealContext } from "@flowsvc/core";
import { getWrappedOrgKey } from "./tenancy.js";

type AesKey = Awaited<ReturnType<typeof importAesKey>>;

/**
 * Seals and opens write-only values with the org's data key. Org keys are stored wrapped by the
 * master key and kept unwrapped in memory only, per process.
 */
export class Keyring {
  readonly #pool: Pool;
  readonly #master: AesKey;
  readonly #orgKeys = new Map<string, Promise<AesKey>>();

  private constructor(pool: Pool, master: AesKey) {
    this.#pool = pool;
    this.#master = master;
  }

  static async create(pool: Pool, masterKey: Uint8Array): Promise<Keyring> {
    return new Keyring(pool, await importAesKey(masterKey));
  }

  /** A new org data key, wrapped for storage in org_keys. */
  async newWrappedOrgKey(orgId: string): Promise<Uint8Array> {
    return wrapOrgKey(this.#master, randomBytes(32), orgId, randomBytes(12));
  }

  async seal(orgId: string, ctx: SealContext, plaintext: string): Promise<Uint8Array> {
    return sealValue(await this.#orgKey(orgId), plaintext, ctx, randomBytes(12));
  }

  async open(orgId: string, ctx: SealContext, sealed: Uint8Array): Promise<string> {
    return openValue(await this.#orgKey(orgId), sealed, ctx);
  }

  /** Fails closed, with a clear message, when the master key does not open this org's key. */
  async verify(orgId: string): Promise<void> {
    try {
      await this.#orgKey(orgId);
    } catch (err) {
      throw new FlowError("config", "the master key does not open this database's org keys", {
        cause: err,
        hint: "start with the FLOWSVC_MASTER_KEY (or data-dir master.key) this database was created with",
      });
    }
  }

  #orgKey(orgId: string): Promise<AesKey> {
    let key = this.#orgKeys.get(orgId);
    if (!key) {
      key = this.#loadOrgKey(orgId);
      key.catch(() => this.#orgKeys.delete(orgId));
      this.#orgKeys.set(orgId, key);
    }
    return key;
  }

  async #loadOrgKey(orgId: string): Promise<AesKey> {
    const wrapped = await getWrappedOrgKey(this.#pool, orgId);
    if (!wrapped) throw new FlowError("internal", `org ${orgId} has no data key`);
    return importAesKey(await unwrapOrgKey(this.#master, wrapped, orgId));
  }
}
