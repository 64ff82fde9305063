/**
 * Connected-account provider configuration (spec, "Connected-account provider configuration"):
 * `FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS` (a JSON array of provider objects) and
 * `FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI`, parsed once at start-up by every deployable's config
 * (`flow server`'s cli/src/server/config.ts and the bins' controller/src/config.ts) through this one
 * parser. A problem refuses the start with a line naming the provider and the field; a value (a
 * client secret) is never echoed.
 */
import { z } from "zod";
import { FlowError } from "../errors.js";
import { findJsonProblem, textProblem } from "../json-guard.js";

/** Hosts where plain http is allowed (spec: "plain http only for localhost"). */
const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** Why `text` is not a URL a provider may use, or undefined: https, or http on a local host; no user info, no fragment. */
export const providerUrlProblem = (text: string): string | undefined => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "must be an absolute URL";
  }
  if (url.protocol === "http:" && !LOCAL_HOSTS.has(url.hostname))
    return "must be https (plain http is allowed only for localhost, 127.0.0.1 and [::1])";
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be an https URL";
  if (url.username !== "" || url.password !== "") return "must not carry a user name or password";
  if (url.hash !== "") return "must not have a #fragment";
  return undefined;
};

/** Why `text` is not a JSON pointer (RFC 6901: empty, or `/`-separated tokens where `~` is only `~0` or `~1`). */
export const jsonPointerProblem = (text: string): string | undefined => {
  if (text !== "" && !text.startsWith("/")) return "must be a JSON pointer: empty or starting with / (e.g. /id)";
  if (/~(?![01])/.test(text)) return "must be a JSON pointer: ~ is only allowed as ~0 (a ~) or ~1 (a /)";
  return undefined;
};

/** The value at a JSON pointer in a parsed document; undefined when the pointer does not reach one. */
export const readJsonPointer = (doc: unknown, pointer: string): unknown => {
  if (pointer === "") return doc;
  let at: unknown = doc;
  for (const raw of pointer.slice(1).split("/")) {
    const token = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (Array.isArray(at)) {
      if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
      at = at[Number(token)];
    } else if (at !== null && typeof at === "object" && Object.hasOwn(at, token)) at = (at as Record<string, unknown>)[token];
    else return undefined;
  }
  return at;
};

const cleanText = (max: number) =>
  z
    .string({ error: (i) => (i.input === undefined ? "is required" : "must be a string") })
    .min(1, "must not be empty")
    .max(max, `must be at most ${max} characters`)
    .superRefine((s, ctx) => {
      const p =
        textProblem(s) ??
        ([...s].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f) ? "holds a control character" : undefined);
      if (p) ctx.addIssue({ code: "custom", message: p });
    });

const providerUrl = () =>
  z
    .string({ error: (i) => (i.input === undefined ? "is required" : "must be a URL string") })
    .max(2048, "must be at most 2048 characters")
    .superRefine((s, ctx) => {
      const p = providerUrlProblem(s);
      if (p) ctx.addIssue({ code: "custom", message: p });
    });

const pointer = (stable: boolean) =>
  z
    .string({ error: (i) => (i.input === undefined ? "is required" : "must be a JSON pointer string") })
    .max(1024, "must be at most 1024 characters")
    .superRefine((s, ctx) => {
      const p = jsonPointerProblem(s) ?? textProblem(s);
      if (p) ctx.addIssue({ code: "custom", message: p });
      else if (stable && s === "")
        ctx.addIssue({ code: "custom", message: "must point into the response (the whole response is not a stable id), e.g. /id" });
    });

/** Custom messages for a missing or mistyped value; other issues (unrecognized keys) keep zod's. */
const required = (what: string) => ({
  error: (i: { input: unknown; code?: string }) =>
    i.code !== "invalid_type" ? undefined : i.input === undefined ? "is required" : `must be ${what}`,
});

/** A provider's name: what `POST .../accounts/connect` names and `flow account list` shows. */
export const PROVIDER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export const AccountProviderSchema = z.strictObject({
  name: z.string(required("a string")).regex(PROVIDER_NAME, "must be 1-64 letters, digits, _ . - (starting with a letter or digit)"),
  authorize_url: providerUrl(),
  token_url: providerUrl(),
  client_id: cleanText(1024),
  client_secret: cleanText(4096),
  scopes: z.array(cleanText(256).regex(/^[^\s]+$/, "must be one scope without white space"), required("an array of strings")).max(256),
  capabilities: z.strictObject(
    {
      rotates_refresh_token: z.boolean(required("true or false (there is no safe default)")),
      reuse_revokes_family: z.boolean(required("true or false (there is no safe default)")),
    },
    required("an object with rotates_refresh_token and reuse_revokes_family (there is no safe default)"),
  ),
  identity: z.strictObject(
    { url: providerUrl(), id_pointer: pointer(true), label_pointer: pointer(false) },
    required("an object with url, id_pointer and label_pointer"),
  ),
  revoke_url: providerUrl().optional(),
  assumed_lifetime_secs: z
    .number(required("a whole number of seconds"))
    .int("must be a whole number of seconds")
    .min(60, "must be at least 60")
    .max(31_536_000, "must be at most 31536000 (a year)")
    .optional(),
});
export type AccountProvider = z.infer<typeof AccountProviderSchema>;

export interface AccountProvidersConfig {
  /** By name. Empty: connecting is not offered. */
  readonly providers: ReadonlyMap<string, AccountProvider>;
  /** The one redirect URI (`GET /oauth/callback` of this deployment); present whenever a provider is. */
  readonly redirectUri: string | undefined;
}

const PROVIDERS_VAR = "FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS";
const REDIRECT_VAR = "FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI";

/** `[1] (github).token_url` from a zod path, naming the provider when its name is readable. */
const whereOf = (raw: unknown, path: readonly PropertyKey[]): string => {
  const [index, ...rest] = path;
  if (typeof index !== "number") return PROVIDERS_VAR;
  const item: unknown = Array.isArray(raw) ? raw[index] : undefined;
  const name = item !== null && typeof item === "object" ? (item as Record<string, unknown>)["name"] : undefined;
  const named = typeof name === "string" && PROVIDER_NAME.test(name) ? ` (provider ${name})` : "";
  const field = rest.map(String).join(".");
  return `${PROVIDERS_VAR}[${index}]${named}${field ? `.${field}` : ""}`;
};

const parseJsonText = (text: string): { value: unknown } | { problem: string } => {
  try {
    const value: unknown = JSON.parse(text);
    const p = findJsonProblem(value, PROVIDERS_VAR);
    return p ? { problem: `${p.path}: ${p.problem}` } : { value };
  } catch (err) {
    return { problem: `${PROVIDERS_VAR}: is not JSON (${err instanceof Error ? err.message.slice(0, 200) : "unreadable"})` };
  }
};

const providerProblems = (raw: unknown): { list: AccountProvider[]; problems: string[] } => {
  const parsed = z.array(AccountProviderSchema, { error: "must be a JSON array of provider objects" }).max(64).safeParse(raw);
  if (!parsed.success) return { list: [], problems: parsed.error.issues.map((i) => `${whereOf(raw, i.path)}: ${i.message}`) };
  const problems: string[] = [];
  const seen = new Set<string>();
  parsed.data.forEach((p, i) => {
    if (seen.has(p.name)) problems.push(`${PROVIDERS_VAR}[${i}] (provider ${p.name}).name: is used by an earlier provider`);
    seen.add(p.name);
  });
  return { list: parsed.data, problems };
};

/**
 * The providers and the redirect URI from the two variables' text (unset or empty: none), or every
 * problem, one a line. The callers add the lines to their own refusal.
 */
export const accountProvidersFromEnv = (
  providersText: string | undefined,
  redirectText: string | undefined,
): { ok: true; config: AccountProvidersConfig } | { ok: false; problems: string[] } => {
  const problems: string[] = [];
  let list: AccountProvider[] = [];
  if (providersText) {
    const json = parseJsonText(providersText);
    if ("problem" in json) problems.push(json.problem);
    else {
      const got = providerProblems(json.value);
      list = got.list;
      problems.push(...got.problems);
    }
  }
  const redirectProblem = redirectText
    ? (providerUrlProblem(redirectText) ?? textProblem(redirectText))
    : list.length > 0
      ? "is required when a provider is configured (the one redirect URI registered with every provider)"
      : undefined;
  if (redirectProblem) problems.push(`${REDIRECT_VAR}: ${redirectProblem}`);
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, config: { providers: new Map(list.map((p) => [p.name, p])), redirectUri: redirectText || undefined } };
};

/** accountProvidersFromEnv, throwing the `config` refusal (for a caller with no other problems to add). */
export const parseAccountProviders = (providersText: string | undefined, redirectText: string | undefined): AccountProvidersConfig => {
  const r = accountProvidersFromEnv(providersText, redirectText);
  if (!r.ok)
    throw new FlowError("config", `invalid connected-account configuration:\n${r.problems.map((p) => `  ${p}`).join("\n")}`, {
      details: { problems: r.problems },
    });
  return r.config;
};
