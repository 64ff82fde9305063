import type { webcrypto } from "node:crypto";
import { FlowError } from "./errors.js";

/**
 * Sealing of write-only values (SECURITY.md "Sealing", ARCHITECTURE.md "Decisions").
 *
 * AES-256-GCM. Each org has a data key; it is stored wrapped (sealed) by the server master key.
 * Every sealed blob is `[format version (1 byte)] [IV (12 bytes)] [ciphertext + 16-byte tag]`,
 * and its additional authenticated data binds it to where it belongs: the format
 * version and the org for a wrapped org key; the format version, org, project, kind and name for a
 * value. A blob copied to another name, project, org or kind, opened with another master key, or
 * altered by one bit fails to open, and the failure never says more than that.
 *
 * The IV is a parameter (core takes randomness as input): pass 12 fresh random bytes for every
 * seal, e.g. `crypto.getRandomValues(new Uint8Array(12))`. Reusing an IV under one key breaks GCM.
 *
 * The cipher is an AeadKey: `importAesKey` makes one on WebCrypto (any JavaScript runtime), and the
 * server's keyring (store/src/keyring.ts) makes one on Node's synchronous AES-256-GCM, which writes
 * the same bytes: WebCrypto runs every encrypt as a thread-pool job behind WebIDL argument
 * conversion, which cost the server more than the cipher itself on a `flow step`'s one round trip.
 */

/** A 256-bit AES-GCM key (128-bit tag). `decrypt` throws when the tag does not verify; the caller words the error. */
export interface AeadKey {
  /** The ciphertext followed by its 16-byte tag. */
  encrypt(iv: Uint8Array, aad: Uint8Array, plaintext: Uint8Array): Uint8Array | Promise<Uint8Array>;
  /** The plaintext of `ciphertextAndTag` (the ciphertext followed by its 16-byte tag). */
  decrypt(iv: Uint8Array, aad: Uint8Array, ciphertextAndTag: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

export const SEAL_FORMAT_VERSION = 1;
/** `node-output`: a graph or pipeline node's clear output, kept sealed beside its masked one (store/src/sealed-journal.ts). */
export const SEAL_KINDS = ["secret", "credential", "account", "journal", "node-output"] as const;

export interface SealContext {
  org: string;
  project: string;
  kind: (typeof SEAL_KINDS)[number];
  name: string;
}

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + IV_BYTES;

const subtle = (): webcrypto.SubtleCrypto => globalThis.crypto.subtle;

const GENERATE_HINT = "generate one with: openssl rand -base64 32";

/**
 * Reads the master key from its text form (FLOWSVC_MASTER_KEY): 32 bytes written as base64 (44
 * characters with padding, 43 without; the URL-safe alphabet is accepted too) or as 64 hex digits.
 * Surrounding whitespace (a trailing newline from a file) is ignored. The error never echoes the text.
 */
export const parseMasterKey = (text: string): Uint8Array => {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) {
    const out = new Uint8Array(KEY_BYTES);
    for (let i = 0; i < KEY_BYTES; i++) out[i] = parseInt(t.slice(2 * i, 2 * i + 2), 16);
    return out;
  }
  if (/^[A-Za-z0-9+/]{43}=?$/.test(t) || /^[A-Za-z0-9_-]{43}=?$/.test(t)) {
    const binary = atob(t.replace(/-/g, "+").replace(/_/g, "/").replace(/=$/, ""));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  }
  const got = t === "" ? "it is empty" : `the text given (${t.length} characters) is neither`;
  throw new FlowError(
    "config",
    `the master key (FLOWSVC_MASTER_KEY) must be 32 bytes written as base64 (44 characters) or hex (64 characters); ${got}; ${GENERATE_HINT}`,
    { hint: GENERATE_HINT },
  );
};

const requireLength = (what: string, bytes: Uint8Array, length: number): void => {
  if (bytes.length !== length) throw new FlowError("internal", `${what} must be ${length} bytes, got ${bytes.length}`);
};

/** 32 raw bytes (the master key or an org data key), checked: the length an AeadKey must be made from. */
export const requireAesKeyBytes = (raw: Uint8Array): void => requireLength("an AES-256 key", raw, KEY_BYTES);

/** Imports 32 raw bytes as a non-extractable WebCrypto AES-256-GCM key (the master key or an org data key). */
export const importAesKey = async (raw: Uint8Array): Promise<AeadKey> => {
  requireAesKeyBytes(raw);
  const key = await subtle().importKey("raw", raw, { name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
  const params = (iv: Uint8Array, aad: Uint8Array): webcrypto.AesGcmParams => ({
    name: "AES-GCM",
    iv,
    additionalData: aad,
    tagLength: 128,
  });
  return {
    encrypt: async (iv, aad, plaintext) => new Uint8Array(await subtle().encrypt(params(iv, aad), key, plaintext)),
    decrypt: async (iv, aad, sealed) => new Uint8Array(await subtle().decrypt(params(iv, aad), key, sealed)),
  };
};

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

// JSON arrays are unambiguous: ("a", "b/c") and ("a/b", "c") give different bytes.
const orgKeyAad = (orgId: string): Uint8Array => utf8.encode(JSON.stringify(["flowsvc/org-key", SEAL_FORMAT_VERSION, orgId]));
const valueAad = (c: SealContext): Uint8Array =>
  utf8.encode(JSON.stringify(["flowsvc/value", SEAL_FORMAT_VERSION, c.org, c.project, c.kind, c.name]));

const seal = async (key: AeadKey, plaintext: Uint8Array, aad: Uint8Array, iv: Uint8Array): Promise<Uint8Array> => {
  requireLength("the IV", iv, IV_BYTES);
  const ct = await key.encrypt(iv, aad, plaintext);
  const out = new Uint8Array(HEADER_BYTES + ct.length);
  out[0] = SEAL_FORMAT_VERSION;
  out.set(iv, 1);
  out.set(ct, HEADER_BYTES);
  return out;
};

/** Opens a sealed blob, or returns undefined: the caller words the error, with no detail of why. */
const open = async (key: AeadKey, sealed: Uint8Array, aad: Uint8Array): Promise<Uint8Array | undefined> => {
  if (sealed.length < HEADER_BYTES + TAG_BYTES || sealed[0] !== SEAL_FORMAT_VERSION) return undefined;
  try {
    const iv = sealed.subarray(1, HEADER_BYTES);
    const ct = sealed.subarray(HEADER_BYTES);
    return await key.decrypt(iv, aad, ct);
  } catch {
    return undefined; // the cause (an OperationError, or Node's "unable to authenticate data") says nothing useful and is not kept
  }
};

const formatNote = (sealed: Uint8Array): string =>
  sealed.length > 0 && sealed[0] !== SEAL_FORMAT_VERSION ? ` (unknown sealed format version ${sealed[0]})` : "";

/** Seals an org's data key with the master key, bound to that org. */
export const wrapOrgKey = async (master: AeadKey, orgKey: Uint8Array, orgId: string, iv: Uint8Array): Promise<Uint8Array> => {
  requireLength("an org data key", orgKey, KEY_BYTES);
  return seal(master, orgKey, orgKeyAad(orgId), iv);
};

/** Opens an org's wrapped data key; fails closed with a wrong master key or another org's key. */
export const unwrapOrgKey = async (master: AeadKey, wrapped: Uint8Array, orgId: string): Promise<Uint8Array> => {
  const raw = await open(master, wrapped, orgKeyAad(orgId));
  if (raw === undefined || raw.length !== KEY_BYTES) {
    throw new FlowError(
      "internal",
      `the data key of org ${JSON.stringify(orgId)} could not be opened${formatNote(wrapped)}: wrong master key (FLOWSVC_MASTER_KEY), or the wrapped key was moved from another org or altered`,
    );
  }
  return raw;
};

/** Seals a value with an org data key, bound to (format version, org, project, kind, name). */
export const sealValue = async (key: AeadKey, plaintext: string, aad: SealContext, iv: Uint8Array): Promise<Uint8Array> => {
  if (!SEAL_KINDS.includes(aad.kind))
    throw new FlowError("internal", `cannot seal a value of kind ${JSON.stringify(aad.kind)}: expected one of ${SEAL_KINDS.join(", ")}`);
  return seal(key, utf8.encode(plaintext), valueAad(aad), iv);
};

/** Opens a sealed value; fails closed when it was sealed for another place or with another key. */
export const openValue = async (key: AeadKey, sealed: Uint8Array, aad: SealContext): Promise<string> => {
  const raw = await open(key, sealed, valueAad(aad));
  let text: string | undefined;
  try {
    text = raw === undefined ? undefined : strictUtf8.decode(raw);
  } catch {
    text = undefined;
  }
  if (text === undefined) {
    throw new FlowError(
      "internal",
      `the ${aad.kind} ${JSON.stringify(aad.name)} of project ${JSON.stringify(aad.project)} in org ${JSON.stringify(aad.org)} could not be opened${formatNote(sealed)}: wrong master key, or the sealed value was moved from another name, project or org, or altered`,
    );
  }
  return text;
};
