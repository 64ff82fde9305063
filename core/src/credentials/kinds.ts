/**
 * What a credential is (spec, "Credential"): a typed, named, write-only value that turns itself
 * into authentication. This file holds the one rule for each part of one: the kinds and their two
 * spellings, the name, and the fields of each kind. The API (`PUT {scoped}/credentials/<name>`),
 * the CLI (`flow credential set`, to fail before a request) and the resolver all call it.
 *
 * Problems are sentences that name the credential and the field, never a value: a message can
 * reach a log, a terminal or an HTTP body.
 */
import { FlowError } from "../errors.js";
import { SECRET_VALUE_MAX_BYTES, secretValueProblem } from "../secret-rules.js";

/** The stored spellings, in the spec's order. */
export const CREDENTIAL_KINDS = ["bearer", "api_key", "basic", "url_token"] as const;
export type CredentialKind = (typeof CREDENTIAL_KINDS)[number];

/** The CLI spellings (`--kind api-key`); the API takes either spelling and answers the stored one. */
export const CLI_KIND_SPELLINGS = {
  bearer: "bearer",
  api_key: "api-key",
  basic: "basic",
  url_token: "url-token",
} as const satisfies Readonly<Record<CredentialKind, string>>;
export type CliCredentialKind = (typeof CLI_KIND_SPELLINGS)[CredentialKind];

/** The kinds in their CLI spelling, in the spec's order (a FlowCredential's `kind`). */
export const CLI_CREDENTIAL_KINDS = CREDENTIAL_KINDS.map((k) => CLI_KIND_SPELLINGS[k]) as unknown as readonly [
  CliCredentialKind,
  ...CliCredentialKind[],
];

/** A kind in either spelling, as stored; undefined when it is no kind. */
export const parseCredentialKind = (text: string): CredentialKind | undefined =>
  CREDENTIAL_KINDS.find((k) => k === text || CLI_KIND_SPELLINGS[k] === text);

/** The kinds as a message lists them: `bearer, api-key, basic, url-token`. */
export const KIND_LIST = CREDENTIAL_KINDS.map((k) => CLI_KIND_SPELLINGS[k]).join(", ");

/** A credential with its value: what is sealed, and what the resolver renders. */
export type CredentialValue =
  | { kind: "bearer"; token: string }
  | { kind: "api_key"; header: string; value: string }
  | { kind: "basic"; username: string; password: string }
  | { kind: "url_token"; token: string };

/** The fields each kind stores: the other fields are refused, so a typo is not silently dropped. */
export const KIND_FIELDS: Readonly<Record<CredentialKind, readonly string[]>> = {
  bearer: ["token"],
  api_key: ["header", "value"],
  basic: ["username", "password"],
  url_token: ["token"],
};

/** Longest name, in characters: what a path segment of the API carries. */
export const CREDENTIAL_NAME_MAX = 100;
/** Longest basic username: `username:password` must stay one environment string under Linux's 128 KiB cap. */
export const CREDENTIAL_USERNAME_MAX = 1024;
/** Longest api-key header name (a header name is a short token). */
export const CREDENTIAL_HEADER_MAX = 128;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** RFC 9110 `token`: the characters a header field name may hold. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** C0 controls and DEL: a header cannot carry them, and no real token holds one. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Headers an api-key credential may not set: they frame the request or the connection, so a value
 * there would break the request or smuggle another one, never authenticate it.
 */
export const FORBIDDEN_API_KEY_HEADERS: readonly string[] = [
  "host",
  "content-length",
  "content-type",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "proxy-connection",
  "upgrade",
  "te",
  "trailer",
  "expect",
];

/** A name as a message may show it: quoted, escaped, and cut short when long. */
export const shownName = (name: string): string => JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}...` : name);

/**
 * Why `name` cannot name a credential (or a connected account: they share one name space); undefined
 * when it can. Letters, digits, `.`, `_` and `-`, starting with a letter or digit: it appears in
 * paths, graph documents and `ENV=name` flags, so nothing there needs escaping.
 */
export const credentialNameProblem = (name: string): string | undefined => {
  if (name === "") return "a credential name is empty";
  if (name.length > CREDENTIAL_NAME_MAX)
    return `a credential name is at most ${CREDENTIAL_NAME_MAX} characters; this one has ${name.length}`;
  if (!NAME.test(name))
    return `credential name ${shownName(name)} is not allowed: use ASCII letters, digits, ".", "_" and "-", starting with a letter or digit`;
  return undefined;
};

/** What JSON Schema can say of credentialNameProblem, for the API's description (ingest/src/openapi). */
export const CREDENTIAL_NAME_JSON_SCHEMA = { type: "string", minLength: 1, maxLength: CREDENTIAL_NAME_MAX, pattern: NAME.source } as const;

/** Throws invalid_argument with the rule's sentence. */
export const assertCredentialName = (name: string): void => {
  const problem = credentialNameProblem(name);
  if (problem !== undefined) throw new FlowError("invalid_argument", problem, { details: { field: "name" } });
};

/** A secret-like field (token, value, password): the secret rules, and no control character. */
const secretFieldProblem = (value: string): string | undefined => {
  const problem = secretValueProblem(value);
  if (problem !== undefined) return problem.replace("a secret value", "a credential value");
  if (CONTROL.test(value))
    return "it holds a control character (a line break, tab or other character below U+0020): it goes into an HTTP header or URL, which cannot carry one";
  return undefined;
};

const headerProblem = (header: string): string | undefined => {
  if (header === "") return "the header name is empty";
  if (header.length > CREDENTIAL_HEADER_MAX)
    return `a header name is at most ${CREDENTIAL_HEADER_MAX} characters; this one has ${header.length}`;
  if (!HEADER_NAME.test(header)) return `${shownName(header)} is not an HTTP header name (letters, digits and !#$%&'*+.^_\`|~-)`;
  if (FORBIDDEN_API_KEY_HEADERS.includes(header.toLowerCase()))
    return `header ${shownName(header)} frames the request, it cannot carry a key: use the header the far side reads the key from (e.g. X-Api-Key)`;
  return undefined;
};

const usernameProblem = (username: string): string | undefined => {
  if (username === "") return "the username is empty";
  if (username.length > CREDENTIAL_USERNAME_MAX)
    return `a username is at most ${CREDENTIAL_USERNAME_MAX} characters; this one has ${username.length}`;
  if (username.includes(":")) return 'the username holds ":", which Basic authentication uses to end the username (RFC 7617)';
  return secretFieldProblem(username);
};

type FieldRule = (value: string) => string | undefined;
const FIELD_RULES: Readonly<Record<string, FieldRule>> = {
  token: secretFieldProblem,
  value: secretFieldProblem,
  password: secretFieldProblem,
  header: headerProblem,
  username: usernameProblem,
};

/** `[Hh][Oo][Ss][Tt]`: a word in a JSON Schema pattern, in any case (ECMA-262 patterns there take no flags). */
const caseless = (word: string): string => [...word].map((c) => (/[a-z]/.test(c) ? `[${c.toUpperCase()}${c}]` : c)).join("");

/** No C0 control, DEL or lone surrogate (secretFieldProblem), as a JSON Schema pattern read with the u flag. */
const SECRET_TEXT = "\\u0000-\\u001f\\u007f\\ud800-\\udfff";

/** What JSON Schema can say of each field's rule above (not a value's size in UTF-8 bytes: its characters bound it). */
const FIELD_JSON_SCHEMAS: Readonly<Record<string, Record<string, unknown>>> = {
  token: { type: "string", minLength: 1, maxLength: SECRET_VALUE_MAX_BYTES, pattern: `^[^${SECRET_TEXT}]*$` },
  value: { type: "string", minLength: 1, maxLength: SECRET_VALUE_MAX_BYTES, pattern: `^[^${SECRET_TEXT}]*$` },
  password: { type: "string", minLength: 1, maxLength: SECRET_VALUE_MAX_BYTES, pattern: `^[^${SECRET_TEXT}]*$` },
  header: {
    type: "string",
    maxLength: CREDENTIAL_HEADER_MAX,
    pattern: HEADER_NAME.source,
    not: { pattern: `^(?:${FORBIDDEN_API_KEY_HEADERS.map(caseless).join("|")})$` },
  },
  username: { type: "string", minLength: 1, maxLength: CREDENTIAL_USERNAME_MAX, pattern: `^[^:${SECRET_TEXT}]*$` },
};

/**
 * The body of `PUT {scoped}/credentials/<name>` as JSON Schema, for the API's description
 * (ingest/src/openapi): one shape per kind, from the kinds, their spellings and their fields' rules
 * here, so it refuses what parseCredentialValue refuses (as far as JSON Schema can say it).
 */
export const CREDENTIAL_BODY_JSON_SCHEMA: Record<string, unknown> = {
  oneOf: CREDENTIAL_KINDS.map((kind) => ({
    type: "object",
    required: ["kind", ...KIND_FIELDS[kind]],
    additionalProperties: false,
    properties: {
      kind: { enum: [...new Set([kind, CLI_KIND_SPELLINGS[kind]])] },
      ...Object.fromEntries(KIND_FIELDS[kind].map((f) => [f, FIELD_JSON_SCHEMAS[f]])),
    },
  })),
};

/** One field's problem, named by the field (`token: ...`); undefined when all is well. */
export const credentialFieldProblem = (field: string, value: string): string | undefined => {
  const rule = FIELD_RULES[field];
  const problem = rule === undefined ? "is not a credential field" : rule(value);
  return problem === undefined ? undefined : `${field}: ${problem}`;
};

/**
 * The body of `PUT {scoped}/credentials/<name>`: the kind (either spelling) and its fields, all
 * strings. Checked by hand, not with zod: the CLI runs these rules too, and a `flow` command does
 * not load zod (cli/src/bin/flow-imports.test.ts).
 */
const setBodyOf = (name: string, body: unknown): Record<string, string> => {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new FlowError("invalid_argument", `credential ${name}: (body): the body must be a JSON object`);
  const problems = Object.entries(body)
    .filter(([, value]) => typeof value !== "string")
    .map(([key]) => `${key}: must be a JSON string`);
  if (problems.length > 0) throw new FlowError("invalid_argument", `credential ${name}: ${problems.join("; ")}`);
  return body as Record<string, string>;
};

const kindOf = (body: Record<string, string>, name: string): CredentialKind => {
  const text = body["kind"];
  const kind = text === undefined ? undefined : parseCredentialKind(text);
  if (kind !== undefined) return kind;
  const got = text === undefined ? "no kind was given" : `got ${shownName(text)}`;
  throw new FlowError("invalid_argument", `credential ${name}: kind: must be one of ${KIND_LIST}; ${got}`, { details: { field: "kind" } });
};

/**
 * A credential's value from a request body (`{kind, ...fields}`), checked whole: an unknown or
 * missing field, or a field that breaks its rule, is refused with every problem at once, each
 * named by its field. Nothing is sealed before this passes.
 */
export const parseCredentialValue = (name: string, body: unknown): CredentialValue => {
  const data = setBodyOf(name, body);
  const kind = kindOf(data, name);
  const fields = KIND_FIELDS[kind];
  const problems: string[] = [];
  for (const key of Object.keys(data)) {
    if (key !== "kind" && !fields.includes(key))
      problems.push(`${key}: a ${CLI_KIND_SPELLINGS[kind]} credential has no such field (it takes ${fields.join(", ")})`);
  }
  for (const field of fields) {
    const value = data[field];
    const problem =
      value === undefined ? `${field}: required for a ${CLI_KIND_SPELLINGS[kind]} credential` : credentialFieldProblem(field, value);
    if (problem !== undefined) problems.push(problem);
  }
  if (problems.length > 0)
    throw new FlowError("invalid_argument", `credential ${name}: ${problems.join("; ")}`, { details: { fields: problems } });
  return { kind, ...Object.fromEntries(fields.map((f) => [f, data[f]])) } as CredentialValue;
};

/** The text a credential is sealed as: its kind and fields, as JSON. */
export const credentialToSealedText = (value: CredentialValue): string => JSON.stringify(value);

/**
 * A credential back from its sealed text. `storedKind` is the row's clear kind column: a sealed value
 * whose kind differs (a row edited by hand) is refused, so the kind used is always the one sealed.
 */
export const credentialFromSealedText = (text: string, storedKind: string): CredentialValue | undefined => {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (data === null || typeof data !== "object" || (data as { kind?: unknown }).kind !== storedKind) return undefined;
  try {
    return parseCredentialValue("(stored)", data);
  } catch {
    return undefined;
  }
};
