import type { webcrypto } from "node:crypto";
import { FlowError } from "./errors.js";

/**
 * HMAC-SHA256 over raw body bytes, for event hooks (SECURITY.md "Event hooks"). The comparison is
 * constant-time: WebCrypto's `subtle.verify` by default (any JavaScript runtime), or the verifier a
 * caller passes (the server passes Node's synchronous HMAC and `timingSafeEqual`: ingest/src/hmac.ts,
 * without WebCrypto's two thread-pool jobs per signed delivery). A missing, malformed or wrong-length
 * signature is `false`, never an exception, so ingest answers 401 and not 500.
 */

const SHA256_HEX = /^[0-9a-fA-F]{64}$/;
const encoder = new TextEncoder();

const subtle = (): webcrypto.SubtleCrypto => globalThis.crypto.subtle;

const hmacKey = (secret: string, usage: "sign" | "verify"): Promise<webcrypto.CryptoKey> =>
  subtle().importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [usage]);

const hexToBytes = (hex: string): Uint8Array => {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
};

/** The lowercase hex HMAC-SHA256 of `body` under `secret` (what a forge puts in its header). */
export const signHmacSha256 = async (secret: string, body: Uint8Array | string): Promise<string> => {
  if (secret === "") throw new FlowError("invalid_argument", "HMAC signing key is empty");
  const bytes = typeof body === "string" ? encoder.encode(body) : body;
  const mac = new Uint8Array(await subtle().sign("HMAC", await hmacKey(secret, "sign"), bytes));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
};

/**
 * Whether `signature` (32 bytes) is the HMAC-SHA256 of `body` under `key` (a non-empty string),
 * compared in constant time. It may throw or reject for a failure of its own: that counts as false.
 */
export type HmacSha256Verifier = (key: string, body: Uint8Array, signature: Uint8Array) => boolean | Promise<boolean>;

/** The verifier on WebCrypto: `subtle.verify` compares in constant time. */
export const webCryptoHmacVerifier: HmacSha256Verifier = async (key, body, signature) =>
  subtle().verify("HMAC", await hmacKey(key, "verify"), signature, body);

/** Whether `signatureHex` (64 hex digits, any case) is the HMAC-SHA256 of `rawBody` under `secret`. */
export const verifyHmacSha256 = async (
  secret: string,
  rawBody: Uint8Array,
  signatureHex: string,
  verify: HmacSha256Verifier = webCryptoHmacVerifier,
): Promise<boolean> => {
  if (typeof signatureHex !== "string" || !SHA256_HEX.test(signatureHex) || typeof secret !== "string" || secret === "") return false;
  try {
    return (await verify(secret, rawBody, hexToBytes(signatureHex))) === true;
  } catch {
    return false;
  }
};

export interface ManualHmacCheck {
  /** The signature header's value as received; absent when the sender sent none. */
  headerValue: string | string[] | undefined;
  /** What precedes the hex digest in the header, e.g. `sha256=`; may be empty. */
  prefix: string;
  key: string;
  rawBody: Uint8Array;
  /** How the HMAC is checked (default: WebCrypto). */
  verify?: HmacSha256Verifier;
}

/** Manual-HMAC hooks: the header must be `<prefix><64 hex digits>` over the raw body. */
export const verifyManualHmac = async ({ headerValue, prefix, key, rawBody, verify }: ManualHmacCheck): Promise<boolean> => {
  // A header sent twice arrives as a list: refuse rather than guess which one counts.
  if (typeof headerValue !== "string") return false;
  const value = headerValue.trim();
  if (!value.startsWith(prefix)) return false;
  return verifyHmacSha256(key, rawBody, value.slice(prefix.length), verify);
};
