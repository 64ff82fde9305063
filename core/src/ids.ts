/**
 * Time-sortable ids: `<prefix>-<26 lower-case Crockford base32 chars>`, 48 bits of milliseconds
 * then 80 random bits. Time and randomness come in as parameters (core does no I/O).
 */
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export type IdPrefix = "run" | "job" | "evt" | "agt" | "usr" | "prj" | "org" | "tok" | "sig" | "act" | "sch" | "req";

const encode = (bytes: Uint8Array, chars: number): string => {
  let out = "";
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5 && out.length < chars) {
      bits -= 5;
      out += ALPHABET[(acc >>> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  if (out.length < chars && bits > 0) out += ALPHABET[(acc << (5 - bits)) & 31];
  return out.slice(0, chars);
};

export const newId = (prefix: IdPrefix, nowMs: number, random: Uint8Array): string => {
  if (random.length < 10) throw new RangeError("newId needs 10 random bytes");
  const bytes = new Uint8Array(16);
  let t = nowMs;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = t % 256;
    t = Math.floor(t / 256);
  }
  bytes.set(random.subarray(0, 10), 6);
  return `${prefix}-${encode(bytes, 26)}`;
};

/** An id derived from other values: equal inputs give the equal id (a replayed emit's handler run). */
export const derivedId = (prefix: IdPrefix, digest: Uint8Array): string => `${prefix}-${encode(digest, 26)}`;

export const ID_PATTERN = /^[a-z]{3}-[0-9a-hjkmnp-tv-z]{26}$/;

/** Whether `text` is an id of `prefix` as newId makes it (the prefix, a dash, 26 characters of the alphabet). */
export const isIdOf = (prefix: IdPrefix, text: string): boolean =>
  text.length === prefix.length + 27 && text.startsWith(`${prefix}-`) && ID_PATTERN.test(text);
