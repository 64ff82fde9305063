/**
 * `flow secret set|list|get|rm`: the project's write-only secrets. No path of this file prints a
 * value: `set` confirms the name, `list` and `get` show names and set times only.
 */
import { Command } from "commander";
import { assertSecretName, assertSecretValue } from "@flowsvc/core/secret-rules";
import { formatAge, formatDocument, formatTime } from "../print-format.js";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import type { Stdio } from "../print.js";
import { listFrom } from "./api-types.js";
import type { SecretInfo } from "./api-types.js";
import { scopedPath, withApi } from "./context.js";
import type { CommandDeps } from "./context.js";
import { examples, formatOf, outputOption } from "./options.js";

/** Stdin's text with one trailing newline (`\n` or `\r\n`) removed, as `echo value |` adds one. */
export const stripOneNewline = (text: string): string => text.replace(/\r?\n$/, "");

const readValue = async (io: Stdio, value: string): Promise<string> => {
  if (value !== "-") return value;
  if (io.stdinIsTty()) io.note("reading the value from stdin; end it with Ctrl-D");
  return stripOneNewline(await io.readStdin());
};

const setCommand = (deps: CommandDeps): Command =>
  new Command("set")
    .description("create or replace a secret (admin); `-` reads the value from stdin")
    .argument("<NAME>", "the secret's name, also the variable name in jobs")
    .argument("<value>", "the value, or - to read it from stdin (keeps it out of shell history)")
    .addHelpText("after", examples("flow secret set API_TOKEN - < token.txt", 'printf %s "$TOKEN" | flow secret set API_TOKEN -'))
    .action(async (name: string, value: string, _opts: unknown, cmd: Command) => {
      // The server applies the same rules; checking first says so before stdin is read or a request sent.
      assertSecretName(name);
      const secret = await readValue(deps.io, value);
      assertSecretValue(name, secret);
      await withApi(deps, cmd, async (ctx) => {
        await ctx.api.call("PUT", scopedPath(ctx, "secrets", name), { value: secret });
        ctx.io.note(`secret ${name} set`);
      });
    });

const SECRET_COLUMNS = (now: Date): Array<Column<SecretInfo>> => [
  { header: "NAME", value: (s) => s.name },
  { header: "SET", value: (s) => formatAge(s.set_at, now) },
];

const listCommand = (deps: CommandDeps): Command =>
  new Command("list")
    .alias("ls")
    .description("list the project's secrets: names and when each was set, never values (viewer)")
    .addOption(outputOption())
    .addHelpText("after", examples("flow secret list", "flow secret list -o json"))
    .action(async (opts: { output?: string }, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        const secrets = listFrom<SecretInfo>(await ctx.api.call("GET", scopedPath(ctx, "secrets")), ["secrets"]);
        printList(ctx.io, formatOf(opts), secrets, { columns: SECRET_COLUMNS(ctx.now), empty: "no secrets" });
      });
    });

const getCommand = (deps: CommandDeps): Command =>
  new Command("get")
    .description("say whether a secret exists and when it was last set (never its value); exit 1 when it does not exist")
    .argument("<NAME>", "the secret's name")
    .addOption(outputOption())
    .addHelpText("after", examples("flow secret get API_TOKEN", "flow secret get API_TOKEN >/dev/null || flow secret set API_TOKEN -"))
    .action(async (name: string, opts: { output?: string }, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        const info = await ctx.api.call<SecretInfo>("GET", scopedPath(ctx, "secrets", name));
        const exists = info.exists !== false;
        const format = formatOf(opts);
        if (format !== "table") ctx.io.out(formatDocument(info, format));
        else ctx.io.out(`${info.name || name}  ${exists ? `set ${formatTime(info.set_at, ctx.now)}` : "not set"}`);
        if (!exists) deps.setExitCode(1);
      });
    });

const rmCommand = (deps: CommandDeps): Command =>
  new Command("rm")
    .description("delete a secret (admin)")
    .argument("<NAME>", "the secret's name")
    .addHelpText("after", examples("flow secret rm API_TOKEN"))
    .action(async (name: string, _opts: unknown, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        await ctx.api.call("DELETE", scopedPath(ctx, "secrets", name));
        ctx.io.note(`secret ${name} removed`);
      });
    });

export const secretCommand = (deps: CommandDeps): Command => {
  const secret = new Command("secret")
    .description("manage the project's write-only secrets (injected into every job as variables, masked in logs)")
    .addHelpText("after", examples('printf %s "$TOKEN" | flow secret set API_TOKEN -', "flow secret list"));
  for (const sub of [setCommand, listCommand, getCommand, rmCommand]) secret.addCommand(sub(deps));
  return secret;
};
