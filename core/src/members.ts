/**
 * Project membership (README "Roles"): the roles, in rank order, the rule for a user name as the
 * members and users routes and `flow member` / `flow user` take it, and the rules for an API
 * token's label and id (`flow token`, ingest/src/routes/tokens.ts). Zod-free, so the CLI checks the same rule at
 * start-up without loading zod (cli/src/bin/flow-imports.test.ts).
 */
import { FlowError } from "./errors.js";
import { isIdOf } from "./ids.js";
import { hasLoneSurrogate } from "./json-guard.js";

/** The project roles, lowest first: `viewer` reads, `member` also submits and connects accounts, `admin` also manages. */
export const ROLES = ["viewer", "member", "admin"] as const;
export type ProjectRole = (typeof ROLES)[number];

export const USER_NAME_MAX = 100;
const USER_NAME = /^[A-Za-z0-9][A-Za-z0-9._@+-]*$/;

/** A name as a message may show it: quoted, escaped, cut short when long. */
const shown = (name: string): string => JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}...` : name);

/**
 * Why `name` cannot name a user; undefined when it can. ASCII letters, digits, `.`, `_`, `@`, `+`
 * and `-`, starting with a letter or digit (an e-mail address fits), at most 100 characters (the most a path segment may have).
 */
export const userNameProblem = (name: string): string | undefined => {
  if (name === "") return "a user name is empty";
  if (name.length > USER_NAME_MAX) return `a user name is at most ${USER_NAME_MAX} characters; this one has ${name.length}`;
  if (!USER_NAME.test(name))
    return `user name ${shown(name)} is not allowed: use ASCII letters, digits, ".", "_", "@", "+" and "-", starting with a letter or digit`;
  return undefined;
};

/** What JSON Schema can say of userNameProblem, for the API's description (ingest/src/openapi). */
export const USER_NAME_JSON_SCHEMA = { type: "string", maxLength: USER_NAME_MAX, pattern: USER_NAME.source } as const;

/** Throws invalid_argument (field `user`) with the rule's sentence. */
export const assertUserName = (name: string): void => {
  const problem = userNameProblem(name);
  if (problem !== undefined) throw new FlowError("invalid_argument", problem, { details: { field: "user" } });
};

export const TOKEN_LABEL_MAX = 100;

/** C0 controls (line breaks, tab, NUL...), DEL and the C1 controls: a label is shown on one line of a table. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Why `label` cannot label an API token; undefined when it can. One line of printable text, 1 to 100 characters. */
export const tokenLabelProblem = (label: string): string | undefined => {
  if (label === "") return "a token label is empty: leave it out for the default one";
  if (label.length > TOKEN_LABEL_MAX) return `a token label is at most ${TOKEN_LABEL_MAX} characters; this one has ${label.length}`;
  if (CONTROL.test(label)) return "a token label holds a control character (a line break, tab, NUL or other character below U+0020)";
  if (hasLoneSurrogate(label)) return "a token label holds a lone surrogate (half of a UTF-16 pair): it is no text";
  return undefined;
};

/** What JSON Schema can say of tokenLabelProblem (no control character, no lone surrogate: a pattern read with the u flag). */
export const TOKEN_LABEL_JSON_SCHEMA = {
  type: "string",
  minLength: 1,
  maxLength: TOKEN_LABEL_MAX,
  pattern: "^[^\\u0000-\\u001f\\u007f-\\u009f\\ud800-\\udfff]*$",
} as const;

/** Throws invalid_argument (field `label`) with the rule's sentence. */
export const assertTokenLabel = (label: string): void => {
  const problem = tokenLabelProblem(label);
  if (problem !== undefined) throw new FlowError("invalid_argument", problem, { details: { field: "label" } });
};

/** Throws invalid_argument (field `id`) unless `id` has a token id's shape; nothing is looked up for one that has not. */
export const assertTokenId = (id: string): void => {
  if (!isIdOf("tok", id))
    throw new FlowError("invalid_argument", `${shown(id)} is no token id: one looks like tok-01k2... (flow token ls lists yours)`, {
      details: { field: "id" },
    });
};
