/**
 * `flow secret set|list|get|rm`: the project's write-only secrets. No path of this file prints a
 * value: `set` confirms the name, `list` and `get` show names and set times only.
 */
import { assertSecretName, assertSecretValue } from "@flowsvc/core/secret-rules";
import { formatAge, formatDocument, formatTime } from "../print-format.js";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import type { Stdio } from "../print.js";
import { listFrom } from "./api-types.js";
import type { SecretInfo } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

/** Stdin's text with one trailing newline (`\n` or `\r\n`) removed, as `echo value |` adds one. */
export const stripOneNewline = (text: string): string => text.replace(/\r?\n$/, "");

const readValue = async (io: Stdio, value: string): Promise<string> => {
  if (value !== "-") return value;
  if (io.stdinIsTty()) io.note("reading the value from stdin; end it with Ctrl-D");
  return stripOneNewline(await io.readStdin());
};

const setSpec: CommandSpec = {
  name: "set",
  description: "create or replace a secret (admin); `-` reads the value from stdin",
  arguments: [
    { name: "<NAME>", description: "the secret's name, also the variable name in jobs" },
    { name: "<value>", description: "the value, or - to read it from stdin (keeps it out of shell history)" },
  ],
  examples: ["flow secret set API_TOKEN - < token.txt", 'printf %s "$TOKEN" | flow secret set API_TOKEN -'],
  action: async (deps, { args: [name = "", value = ""], flags }) => {
    // The server applies the same rules; checking first says so before stdin is read or a request sent.
    assertSecretName(name);
    const secret = await readValue(deps.io, value);
    assertSecretValue(name, secret);
    await withSettings(deps, flags, async (ctx) => {
      await ctx.api.call("PUT", scopedPath(ctx, "secrets", name), { value: secret });
      ctx.io.note(`secret ${name} set`);
    });
  },
};

const SECRET_COLUMNS = (now: Date): Array<Column<SecretInfo>> => [
  { header: "NAME", value: (s) => s.name },
  { header: "SET", value: (s) => formatAge(s.set_at, now) },
];

const listSpec: CommandSpec = {
  name: "list",
  aliases: ["ls"],
  description: "list the project's secrets: names and when each was set, never values (viewer)",
  options: [OUTPUT_OPTION],
  examples: ["flow secret list", "flow secret list -o json"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const secrets = listFrom<SecretInfo>(await ctx.api.call("GET", scopedPath(ctx, "secrets")), ["secrets"]);
      printList(ctx.io, formatOf(opts), secrets, { columns: SECRET_COLUMNS(ctx.now), empty: "no secrets" });
    });
  },
};

const getSpec: CommandSpec = {
  name: "get",
  description: "say whether a secret exists and when it was last set (never its value); exit 1 when it does not exist",
  arguments: [{ name: "<NAME>", description: "the secret's name" }],
  options: [OUTPUT_OPTION],
  examples: ["flow secret get API_TOKEN", "flow secret get API_TOKEN >/dev/null || flow secret set API_TOKEN -"],
  action: async (deps, { args: [name = ""], opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const info = await ctx.api.call<SecretInfo>("GET", scopedPath(ctx, "secrets", name));
      const exists = info.exists !== false;
      const format = formatOf(opts);
      if (format !== "table") ctx.io.out(formatDocument(info, format));
      else ctx.io.out(`${info.name || name}  ${exists ? `set ${formatTime(info.set_at, ctx.now)}` : "not set"}`);
      if (!exists) deps.setExitCode(1);
    });
  },
};

const rmSpec: CommandSpec = {
  name: "rm",
  description: "delete a secret (admin)",
  arguments: [{ name: "<NAME>", description: "the secret's name" }],
  examples: ["flow secret rm API_TOKEN"],
  action: async (deps, { args: [name = ""], flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      await ctx.api.call("DELETE", scopedPath(ctx, "secrets", name));
      ctx.io.note(`secret ${name} removed`);
    });
  },
};

export const secretSpec: CommandSpec = {
  name: "secret",
  description: "manage the project's write-only secrets (injected into every job as variables, masked in logs)",
  subcommands: [setSpec, listSpec, getSpec, rmSpec],
  examples: ['printf %s "$TOKEN" | flow secret set API_TOKEN -', "flow secret list"],
};
