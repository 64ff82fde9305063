/**
 * The request URL's checks and its one loggable form. Path parameters arrive decoded by the
 * router; query strings are checked here piece by piece, as `URLSearchParams` and Fastify's parser
 * read them (`&`-separated, `+` a space, `%XX` UTF-8).
 */
import { textProblem } from "./json-guard.js";

const shown = (raw: string): string => JSON.stringify(raw.length > 64 ? `${raw.slice(0, 64)}...` : raw);

/** Strict decoding: undefined for a `%` not followed by two hex digits, or bytes that are not UTF-8. */
const decodeStrict = (s: string): string | undefined => {
  try {
    return decodeURIComponent(s.replaceAll("+", " "));
  } catch {
    return undefined;
  }
};

/** Why the query string (without its `?`) cannot be taken, naming the parameter; undefined when it can. */
export const queryProblem = (query: string): string | undefined => {
  for (const piece of query.split("&")) {
    if (piece === "") continue;
    const eq = piece.indexOf("=");
    const rawName = eq < 0 ? piece : piece.slice(0, eq);
    const name = decodeStrict(rawName);
    if (name === undefined)
      return `the name of query parameter ${shown(rawName)} is not valid percent-encoding (% takes two hex digits, and the bytes must be UTF-8)`;
    const nameProblem = textProblem(name);
    if (nameProblem) return `the name of query parameter ${shown(rawName)} ${nameProblem}`;
    const value = decodeStrict(eq < 0 ? "" : piece.slice(eq + 1));
    if (value === undefined)
      return `query parameter ${shown(name)} is not valid percent-encoding (% takes two hex digits, and the bytes must be UTF-8)`;
    const valueProblem = textProblem(value);
    if (valueProblem) return `query parameter ${shown(name)} ${valueProblem}`;
  }
  return undefined;
};

/** Why a decoded path parameter cannot be taken, naming it; undefined when it can. */
export const pathParamProblem = (params: Record<string, unknown>): string | undefined => {
  for (const [name, value] of Object.entries(params)) {
    const problem = typeof value === "string" ? textProblem(value) : undefined;
    if (problem) return `path parameter ${name} ${problem}`;
  }
  return undefined;
};

/** A parameter name as loosely as anyone might read it: decoded until it stops changing, `%XX` by `%XX` when not UTF-8. */
const looseName = (raw: string): string => {
  let s = raw.replaceAll("+", " ");
  for (let round = 0; round < 5; round++) {
    const next = decodeStrict(s) ?? s.replace(/%([0-9a-f]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    if (next === s) break;
    s = next;
  }
  return s.trim().toLowerCase();
};

/** A parameter name that means `secret` to some parser: any case and encoding, and with brackets (`secret[]`, `secret[0]`, PHP's and qs's arrays). */
const isSecretName = (raw: string): boolean => looseName(raw).replace(/(\[[^\]]*\])+$/, "") === "secret";

/** A value that holds a hook secret (`fhs_...`, store/src/hooks.ts), whatever the parameter is called (`?token=fhs_...`). */
const holdsHookSecret = (raw: string): boolean => looseName(raw).includes("fhs_");

/**
 * The request URL with the value of every query parameter whose decoded name is `secret` (any
 * case, any percent-encoding, even doubled: `?%73ecret=`, `?SECRET=`, `?%2573ecret=`; with
 * brackets: `?secret[]=`), and of any parameter whose value holds a hook secret (`?token=fhs_...`), replaced by
 * `[redacted]`: the only form of a hook URL a log line may carry. `;` and `#` inside a redacted
 * value are hidden with it up to the next `&`, and also start a parameter of their own, so neither
 * `?secret=a;b` nor `?a=1;secret=b` shows the secret.
 */
export const redactSecretQuery = (url: string): string => {
  const q = url.indexOf("?");
  if (q < 0) return url;
  const parts = url.slice(q + 1).split(/([&;#])/);
  let out = "";
  let hiding = false;
  for (let i = 0; i < parts.length; i += 2) {
    const sep = i === 0 ? "" : parts[i - 1]!;
    const piece = parts[i]!;
    if (sep === "&") hiding = false;
    const eq = piece.indexOf("=");
    if (eq >= 0 && (isSecretName(piece.slice(0, eq)) || holdsHookSecret(piece.slice(eq + 1)))) {
      out += `${sep}${piece.slice(0, eq)}=[redacted]`;
      hiding = true;
    } else if (!hiding) {
      out += `${sep}${piece}`;
    }
  }
  return `${url.slice(0, q)}?${out}`;
};
