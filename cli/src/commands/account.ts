/**
 * `flow account list|disable|rm`: the project's connected accounts (spec, "Connected account" and the CLI
 * table). Connecting is a browser flow only (the Connections page, or `POST {scoped}/accounts/connect`
 * from a console); the CLI lists, switches off (until a reconnect) and removes. No path prints a token.
 */
import { assertCredentialName } from "@flowsvc/core/credentials";
import type { Column } from "../print-format.js";
import { printList } from "../print.js";
import { listFrom } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

interface AccountInfo {
  name: string;
  provider: string;
  far_label: string;
  status: string;
  granter?: string | null;
}

const COLUMNS: Array<Column<AccountInfo>> = [
  { header: "NAME", value: (a) => a.name },
  { header: "PROVIDER", value: (a) => a.provider },
  { header: "ACCOUNT", value: (a) => a.far_label },
  { header: "STATUS", value: (a) => a.status },
  { header: "GRANTER", value: (a) => a.granter ?? "-" },
];

const listSpec: CommandSpec = {
  name: "list",
  aliases: ["ls"],
  description: "list the project's connected accounts: name, provider, far-side account, status (viewer)",
  options: [OUTPUT_OPTION],
  examples: ["flow account list", "flow account list -o json"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const rows = listFrom<AccountInfo>(await ctx.api.call("GET", scopedPath(ctx, "accounts")), ["accounts"]);
      printList(ctx.io, formatOf(opts), rows, { columns: COLUMNS, empty: "no connected accounts (connect one on the Connections page)" });
    });
  },
};

const rmSpec: CommandSpec = {
  name: "rm",
  description: "forget a connected account, and revoke it at the provider when it allows (admin, or the account's granter)",
  arguments: [{ name: "<name>", description: "the account's name" }],
  examples: ["flow account rm github"],
  action: async (deps, { args: [name = ""], flags }) => {
    assertCredentialName(name);
    await withSettings(deps, flags, async (ctx) => {
      const gone = await ctx.api.call<{ revoked: boolean }>("DELETE", scopedPath(ctx, "accounts", name));
      ctx.io.note(`connected account ${name} removed${gone.revoked ? " and revoked at the provider" : " (not revoked at the provider)"}`);
    });
  },
};

const disableSpec: CommandSpec = {
  name: "disable",
  description:
    "switch a connected account off until it is reconnected: nodes and jobs naming it fail, nothing is renewed (admin, or the account's granter)",
  arguments: [{ name: "<name>", description: "the account's name" }],
  examples: ["flow account disable github"],
  action: async (deps, { args: [name = ""], flags }) => {
    assertCredentialName(name);
    await withSettings(deps, flags, async (ctx) => {
      const r = await ctx.api.call<{ changed: boolean }>("POST", `${scopedPath(ctx, "accounts", name)}/disable`, {});
      ctx.io.note(
        r.changed
          ? `connected account ${name} disabled: reconnect it on the Connections page to use it again`
          : `connected account ${name} was already disabled`,
      );
    });
  },
};

export const accountSpec: CommandSpec = {
  name: "account",
  description: "list, disable and remove connected accounts (connecting is done in the browser, on the Connections page)",
  subcommands: [listSpec, disableSpec, rmSpec],
  examples: [
    "flow account list",
    "flow account disable github",
    "flow account rm github",
    "flow submit deploy.sh --credential GH_TOKEN=github",
  ],
};
