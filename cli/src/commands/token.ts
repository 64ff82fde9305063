/**
 * `flow token create|ls|rm`: the caller's own API tokens (README "Roles"; /api/v1/tokens). A new
 * token is printed alone on stdout and shown this once; the list shows id, label, created and last
 * used, never a token. `rm` revokes at once; removing the token this command itself uses logs you
 * out, so it needs --force (as `gh auth logout` asks first).
 */
import { assertTokenId, assertTokenLabel } from "@flowsvc/core/members";
import { formatDocument, formatTime, type Column } from "../print-format.js";
import { printList } from "../print.js";
import { listFrom } from "./api-types.js";
import { withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

interface TokenInfo {
  id: string;
  label: string;
  created_at: string;
  last_used_at: string | null;
  current: boolean;
}

interface NewToken {
  id: string;
  label: string;
  created_at: string;
  token: string;
}

const COLUMNS = (now: Date): Array<Column<TokenInfo>> => [
  { header: "ID", value: (t) => (t.current ? `${t.id} *` : t.id) },
  { header: "LABEL", value: (t) => t.label },
  { header: "CREATED", value: (t) => formatTime(t.created_at, now) },
  { header: "LAST USED", value: (t) => (t.last_used_at ? formatTime(t.last_used_at, now) : "never") },
];

const createSpec: CommandSpec = {
  name: "create",
  description: "make a new API token for yourself and print it (shown once)",
  options: [{ flags: "--label <text>", description: "what the token is for (default: created by <you>)" }, OUTPUT_OPTION],
  examples: ['TOKEN=$(flow token create --label "ci on laptop")', "flow token create -o json"],
  action: async (deps, { opts, flags }) => {
    const { label } = opts as { label?: string };
    if (label !== undefined) assertTokenLabel(label);
    await withSettings(deps, flags, async (ctx) => {
      const t = await ctx.api.call<NewToken>("POST", "/api/v1/tokens", label === undefined ? {} : { label });
      const format = formatOf(opts);
      ctx.io.out(format === "table" ? t.token : formatDocument(t, format));
      ctx.io.note(`token ${t.id} (${t.label}) is shown only now: the server keeps its digest alone; \`flow token rm ${t.id}\` revokes it`);
    });
  },
};

const lsSpec: CommandSpec = {
  name: "ls",
  aliases: ["list"],
  description: "list your API tokens: id (* the one in use), label, created, last used; never a token",
  options: [OUTPUT_OPTION],
  examples: ["flow token ls", "flow token ls -o json"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const rows = listFrom<TokenInfo>(await ctx.api.call("GET", "/api/v1/tokens"), ["tokens"]);
      printList(ctx.io, formatOf(opts), rows, { columns: COLUMNS(deps.now()), empty: "no tokens" });
    });
  },
};

const rmSpec: CommandSpec = {
  name: "rm",
  description: "revoke one of your API tokens at once; the one this command uses only with --force (it logs you out)",
  arguments: [{ name: "<id>", description: "the token's id (tok-..., from flow token ls)" }],
  options: [{ flags: "--force", description: "also when it is the token this command uses" }],
  examples: ["flow token rm tok-01kb4r0m9x2c3v4b5n6m7q8w9e", "flow token rm tok-01kb4r0m9x2c3v4b5n6m7q8w9e --force"],
  action: async (deps, { args: [id = ""], opts, flags }) => {
    const { force } = opts as { force?: boolean };
    assertTokenId(id);
    await withSettings(deps, flags, async (ctx) => {
      await ctx.api.call("DELETE", `/api/v1/tokens/${id}${force ? "?force=true" : ""}`);
      ctx.io.note(`token ${id} revoked`);
    });
  },
};

export const tokenSpec: CommandSpec = {
  name: "token",
  description: "make, list and revoke your own API tokens",
  subcommands: [createSpec, lsSpec, rmSpec],
  examples: ["flow token create --label ci", "flow token ls", "flow token rm <id>"],
};
