/**
 * Project membership (README "Roles"): the roles, in rank order, and the rule for a user name as
 * the members routes and `flow member` take it. Zod-free, so the CLI checks the same rule at
 * start-up without loading zod (cli/src/bin/flow-imports.test.ts).
 */
import { FlowError } from "./errors.js";

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

/** Throws invalid_argument (field `user`) with the rule's sentence. */
export const assertUserName = (name: string): void => {
  const problem = userNameProblem(name);
  if (problem !== undefined) throw new FlowError("invalid_argument", problem, { details: { field: "user" } });
};
