/**
 * `flow credential set|list|rm`: the project's typed, write-only credentials (spec, "Credential"
 * and the CLI table). No path of this file prints a value or a stored field: `set` confirms the
 * name and kind, `list` shows names, kinds and set times only.
 *
 * Secret fields come from stdin (`--token -`, `--password -`), never from the command line, where
 * shell history and `ps` keep them; the spec's one exception is an api-key's `--value <V>` (`-`
 * reads stdin there too).
 */
import { FlowError } from "@flowsvc/core/errors";
import {
  CLI_KIND_SPELLINGS,
  CREDENTIAL_KINDS,
  KIND_FIELDS,
  assertCredentialName,
  parseCredentialKind,
  parseCredentialValue,
  type CredentialKind,
} from "@flowsvc/core/credentials";
import { formatAge } from "../print-format.js";
import type { Column } from "../print-format.js";
import { printList } from "../print.js";
import type { Stdio } from "../print.js";
import { listFrom } from "./api-types.js";
import type { SettingFlags } from "../config.js";
import { scopedPath, withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec, Invocation } from "./spec.js";
import { stripOneNewline } from "./secret.js";

interface CredentialInfo {
  name: string;
  kind: string;
  set_at?: string | null;
}

interface SetOptions {
  kind: string;
  token?: string;
  header?: string;
  value?: string;
  username?: string;
  password?: string;
}

type Field = "token" | "header" | "value" | "username" | "password";
const FIELDS: readonly Field[] = ["token", "header", "value", "username", "password"];
/** Fields whose value is read only from stdin (`-`); the spec shows no other way for them. */
const STDIN_ONLY: readonly Field[] = ["token", "password"];

const kindOfFlag = (text: string): CredentialKind => {
  const kind = parseCredentialKind(text);
  if (kind === undefined)
    throw new FlowError(
      "invalid_argument",
      `--kind ${JSON.stringify(text)}: expected one of ${CREDENTIAL_KINDS.map((k) => CLI_KIND_SPELLINGS[k]).join(", ")}`,
    );
  return kind;
};

const usage = (kind: CredentialKind): string => {
  const spelling = CLI_KIND_SPELLINGS[kind];
  return `${/^[aeiou]/.test(spelling) ? "an" : "a"} ${spelling} credential takes ${KIND_FIELDS[kind].map((f) => `--${f}`).join(" and ")}`;
};

/** The flags given, checked against the kind: each of its fields once, no other, stdin for the secret ones. */
const checkFlags = (kind: CredentialKind, opts: SetOptions): void => {
  const wanted = KIND_FIELDS[kind] as readonly Field[];
  for (const field of FIELDS) {
    const given = opts[field];
    if (given === undefined && wanted.includes(field))
      throw new FlowError("invalid_argument", `--${field} is required: ${usage(kind)}`, { hint: "see `flow credential set --help`" });
    if (given !== undefined && !wanted.includes(field))
      throw new FlowError("invalid_argument", `--${field} is not a flag of this kind: ${usage(kind)}`, {
        hint: "see `flow credential set --help`",
      });
    if (given !== undefined && given !== "-" && STDIN_ONLY.includes(field))
      throw new FlowError(
        "invalid_argument",
        `--${field} takes only -, and reads the value from stdin: on the command line it would stay in shell history and ps`,
        {
          hint: `printf %s "$VALUE" | flow credential set <name> --kind ${CLI_KIND_SPELLINGS[kind]} ... --${field} -`,
        },
      );
  }
};

const readStdinValue = async (io: Stdio, field: Field): Promise<string> => {
  if (io.stdinIsTty()) io.note(`reading the ${field} from stdin; end it with Ctrl-D`);
  return stripOneNewline(await io.readStdin());
};

/** The request body `{kind, ...fields}`, with the one `-` field read from stdin and core's rules applied before any request. */
export const credentialBody = async (io: Stdio, name: string, opts: SetOptions): Promise<Record<string, string>> => {
  assertCredentialName(name);
  const kind = kindOfFlag(opts.kind);
  checkFlags(kind, opts);
  const body: Record<string, string> = { kind };
  for (const field of KIND_FIELDS[kind] as readonly Field[]) {
    const given = opts[field]!;
    body[field] = given === "-" && field !== "header" && field !== "username" ? await readStdinValue(io, field) : given;
  }
  parseCredentialValue(name, body); // the server applies the same rules
  return body;
};

/**
 * `--token` is also the program's global option (the API token), and the program takes it wherever
 * it appears (commander and fastParse alike): for a kind that takes a token, the program's `--token`
 * is this command's, and the API token comes from FLOWSVC_TOKEN or the saved config instead.
 */
const takeTokenFlag = (call: Invocation): { opts: SetOptions; flags: SettingFlags } => {
  const opts = call.opts as unknown as SetOptions;
  const kind = parseCredentialKind(opts.kind);
  if (kind === undefined || !KIND_FIELDS[kind].includes("token") || call.flags.token === undefined) return { opts, flags: call.flags };
  return { opts: { ...opts, token: call.flags.token }, flags: { ...call.flags, token: undefined } };
};

const setSpec: CommandSpec = {
  name: "set",
  description: "create or replace a credential (admin); secret fields are read from stdin with -",
  arguments: [
    { name: "<name>", description: "the credential's name (letters, digits, . _ -); graphs and --credential ENV=name refer to it" },
  ],
  options: [
    {
      flags: "--kind <kind>",
      description: "how it authenticates",
      choices: CREDENTIAL_KINDS.map((k) => CLI_KIND_SPELLINGS[k]),
      mandatory: true,
    },
    {
      flags: "--token <->",
      description: "bearer, url-token: - reads the token from stdin (the API token then comes from FLOWSVC_TOKEN or flow login)",
    },
    { flags: "--header <H>", description: "api-key: the header that carries the key (e.g. X-Api-Key)" },
    { flags: "--value <V>", description: "api-key: the key, or - to read it from stdin" },
    { flags: "--username <U>", description: "basic: the username" },
    { flags: "--password <->", description: "basic: - reads the password from stdin" },
  ],
  examples: [
    'printf %s "$GITHUB_TOKEN" | flow credential set github --kind bearer --token -',
    'printf %s "$KEY" | flow credential set llm --kind api-key --header x-api-key --value -',
    'printf %s "$PASS" | flow credential set registry --kind basic --username ci --password -',
    'printf %s "$HOOK_TOKEN" | flow credential set chat-hook --kind url-token --token -',
  ],
  action: async (deps, call) => {
    const [name = ""] = call.args;
    const { opts, flags } = takeTokenFlag(call);
    const body = await credentialBody(deps.io, name, opts);
    await withSettings(deps, flags, async (ctx) => {
      const set = await ctx.api.call<CredentialInfo>("PUT", scopedPath(ctx, "credentials", name), body);
      ctx.io.note(`credential ${name} set (${CLI_KIND_SPELLINGS[parseCredentialKind(set.kind) ?? "bearer"]})`);
    });
  },
};

const COLUMNS = (now: Date): Array<Column<CredentialInfo>> => [
  { header: "NAME", value: (c) => c.name },
  { header: "KIND", value: (c) => CLI_KIND_SPELLINGS[parseCredentialKind(c.kind) ?? "bearer"] ?? c.kind },
  { header: "SET", value: (c) => formatAge(c.set_at, now) },
];

const listSpec: CommandSpec = {
  name: "list",
  aliases: ["ls"],
  description: "list the project's credentials: names, kinds and when each was set, never values (viewer)",
  options: [OUTPUT_OPTION],
  examples: ["flow credential list", "flow credential list -o json"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const rows = listFrom<CredentialInfo>(await ctx.api.call("GET", scopedPath(ctx, "credentials")), ["credentials"]);
      printList(ctx.io, formatOf(opts), rows, { columns: COLUMNS(ctx.now), empty: "no credentials" });
    });
  },
};

const rmSpec: CommandSpec = {
  name: "rm",
  description: "delete a credential (admin); jobs that name it fail until it is set again",
  arguments: [{ name: "<name>", description: "the credential's name" }],
  examples: ["flow credential rm github"],
  action: async (deps, { args: [name = ""], flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      await ctx.api.call("DELETE", scopedPath(ctx, "credentials", name));
      ctx.io.note(`credential ${name} removed`);
    });
  },
};

export const credentialSpec: CommandSpec = {
  name: "credential",
  description: "manage the project's typed, write-only credentials (bearer, api-key, basic, url-token)",
  subcommands: [setSpec, listSpec, rmSpec],
  examples: [
    'printf %s "$TOKEN" | flow credential set github --kind bearer --token -',
    "flow submit deploy.sh --credential GH_TOKEN=github",
  ],
};
