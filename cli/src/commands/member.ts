/**
 * `flow member ls|set|rm`: who has which role on the project (README "Roles"; admin only). Removing
 * a member disables every connected account they granted in the project, in the same transaction
 * (the server says which). The user name's rule is core's (zod-free subpath); the server checks it
 * again.
 */
import { ROLES, assertUserName } from "@flowsvc/core/members";
import type { Column } from "../print-format.js";
import { printList } from "../print.js";
import { listFrom } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

interface MemberInfo {
  user: string;
  role: string;
  granted: string[];
}

const COLUMNS: Array<Column<MemberInfo>> = [
  { header: "USER", value: (m) => m.user },
  { header: "ROLE", value: (m) => m.role },
  { header: "ACCOUNTS GRANTED", value: (m) => (m.granted.length > 0 ? m.granted.join(",") : "-") },
];

const lsSpec: CommandSpec = {
  name: "ls",
  aliases: ["list"],
  description: "list the project's members: user, role, the connected accounts each granted here (admin)",
  options: [OUTPUT_OPTION],
  examples: ["flow member ls", "flow member ls -o json"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const rows = listFrom<MemberInfo>(await ctx.api.call("GET", scopedPath(ctx, "members")), ["members"]);
      printList(ctx.io, formatOf(opts), rows, { columns: COLUMNS, empty: "no members" });
    });
  },
};

const setSpec: CommandSpec = {
  name: "set",
  description: "give a user a role on the project, adding them when they are no member yet (admin); the last admin stays admin",
  arguments: [{ name: "<user>", description: "the user's name" }],
  options: [{ flags: "--role <role>", description: "the role", choices: ROLES, mandatory: true }],
  examples: ["flow member set ann --role member", "flow member set bob --role admin"],
  action: async (deps, { args: [user = ""], opts, flags }) => {
    const { role } = opts as { role: string };
    assertUserName(user);
    await withSettings(deps, flags, async (ctx) => {
      const r = await ctx.api.call<{ role: string; added: boolean }>("PUT", scopedPath(ctx, "members", user), { role });
      ctx.io.note(`${user} ${r.added ? "added as" : "is now"} ${r.role} of ${ctx.settings.org}/${ctx.settings.project}`);
    });
  },
};

const rmSpec: CommandSpec = {
  name: "rm",
  description: "remove a member from the project (admin): every connected account they granted here is disabled at once",
  arguments: [{ name: "<user>", description: "the user's name" }],
  examples: ["flow member rm ann"],
  action: async (deps, { args: [user = ""], flags }) => {
    assertUserName(user);
    await withSettings(deps, flags, async (ctx) => {
      const r = await ctx.api.call<{ disabled: string[] }>("DELETE", scopedPath(ctx, "members", user));
      ctx.io.note(
        `${user} removed${r.disabled.length > 0 ? `; connected accounts disabled (reconnect them to use them again): ${r.disabled.join(", ")}` : ""}`,
      );
    });
  },
};

export const memberSpec: CommandSpec = {
  name: "member",
  description: "manage who has which role on the project (admin): viewer, member, admin",
  subcommands: [lsSpec, setSpec, rmSpec],
  examples: ["flow member ls", "flow member set ann --role member", "flow member rm ann"],
};
