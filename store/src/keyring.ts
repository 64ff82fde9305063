import { createCipheriv, createDecipheriv, createSecretKey, randomBytes } from "node:crypto";
import type { Pool } from "pg";
import {
  FlowError,
  openValue,
  requireAesKeyBytes,
  sealValue,
  unwrapOrgKey,
  wrapOrgKey,
  type AeadKey,
  type SealContext,
} from "@flowsvc/core";
import { getWrappedOrgKey } from "./tenancy.js";

type AesKey = AeadKey;
const TAG_BYTES = 16;

/**
 * An AES-256-GCM key on Node's own cipher (OpenSSL, as WebCrypto's is), synchronous: the same bytes
 * as core's WebCrypto key (store/src/keyring.test.ts seals with one and opens with the other), without
 * a thread-pool job and WebIDL conversions per value (~70-90 us of the server's CPU per seal, measured
 * beside ~6-12 us for this; a `flow step` that prints seals its output on the step's one round trip).
 */
export const nodeAesKey = (raw: Uint8Array): AeadKey => {
  requireAesKeyBytes(raw);
  const key = createSecretKey(raw);
  return {
    encrypt: (iv, aad, plaintext) => {
      const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES }).setAAD(aad);
      return Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    },
    decrypt: (iv, aad, sealed) => {
      if (sealed.length < TAG_BYTES) throw new Error("too short");
      const decipher = createDecipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES })
        .setAAD(aad)
        .setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
      return Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)), decipher.final()]);
    },
  };
};

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

  static create(pool: Pool, masterKey: Uint8Array): Promise<Keyring> {
    return new Promise((resolve) => resolve(new Keyring(pool, nodeAesKey(masterKey)))); // a bad key rejects, as before
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
    return nodeAesKey(await unwrapOrgKey(this.#master, wrapped, orgId));
  }
}
