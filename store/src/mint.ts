import { hash, randomBytes, randomFillSync } from "node:crypto";
import { newId, type IdPrefix } from "@flowsvc/core";

/**
 * The system's randomness for ids, drawn 4 KiB at a time (one getrandom call per ~400 ids instead
 * of one per id: every request mints at least its request id). Each id takes bytes no other id
 * took; tokens and secrets (below) still draw their own.
 */
const idRandom = Buffer.alloc(4096);
let idRandomAt = idRandom.length;

/** A fresh time-sortable id (core/src/ids.ts) from the clock and the system's randomness. */
export const mintId = (prefix: IdPrefix): string => {
  if (idRandomAt + 10 > idRandom.length) {
    randomFillSync(idRandom);
    idRandomAt = 0;
  }
  const random = idRandom.subarray(idRandomAt, idRandomAt + 10);
  idRandomAt += 10;
  return newId(prefix, Date.now(), random);
};

/** The kinds of bearer token: `flw_` a user's API token, `job_` one dispatch of one job (agent API). */
export type TokenKind = "flw" | "job";

/** A bearer secret and its digest; only the digest is ever stored. */
export const mintToken = (kind: TokenKind): { token: string; digest: Buffer } => {
  const token = `${kind}_${randomBytes(32).toString("base64url")}`;
  return { token, digest: digestToken(token) };
};

/** SHA-256 of a token, by the one-shot hash (no Hash object per call: it is on every request and hook delivery). */
export const digestToken = (token: string): Buffer => hash("sha256", token, "buffer");

/** The kind a presented token claims by its prefix (it proves nothing: only its digest's row does). */
export const tokenKindOf = (token: string): TokenKind | undefined =>
  token.startsWith("job_") ? "job" : token.startsWith("flw_") ? "flw" : undefined;
