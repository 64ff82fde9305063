/**
 * `flow member ls|set|rm`: who has which role on the project (README "Roles"; admin only). Removing
 * a member disables every connected account they granted in the project, in the same transaction
 * (the server says which). The user name's rule is core's (zod-free subpath); the server checks it
 * again.
 */
import { Command, Option } from "commander";
import { ROLES, assertUserName } from "@flowsvc/core/members";
import type { Column } from "../print-format.js";
import { printList } from "../print.js";
import { listFrom } from "./api-types.js";
import { scopedPath, withApi } from "./context.js";
import type { CommandDeps } from "./context.js";
import { examples, formatOf, outputOption } from "./options.js";

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

const lsCommand = (deps: CommandDeps): Command =>
  new Command("ls")
    .alias("list")
    .description("list the project's members: user, role, the connected accounts each granted here (admin)")
    .addOption(outputOption())
    .addHelpText("after", examples("flow member ls", "flow member ls -o json"))
    .action(async (opts: { output?: string }, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        const rows = listFrom<MemberInfo>(await ctx.api.call("GET", scopedPath(ctx, "members")), ["members"]);
        printList(ctx.io, formatOf(opts), rows, { columns: COLUMNS, empty: "no members" });
      });
    });

const setCommand = (deps: CommandDeps): Command =>
  new Command("set")
    .description("give a user a role on the project, adding them when they are no member yet (admin); the last admin stays admin")
    .argument("<user>", "the user's name")
    .addOption(new Option("--role <role>", "the role").choices(ROLES).makeOptionMandatory())
    .addHelpText("after", examples("flow member set ann --role member", "flow member set bob --role admin"))
    .action(async (user: string, opts: { role: string }, cmd: Command) => {
      assertUserName(user);
      await withApi(deps, cmd, async (ctx) => {
        const r = await ctx.api.call<{ role: string; added: boolean }>("PUT", scopedPath(ctx, "members", user), { role: opts.role });
        ctx.io.note(`${user} ${r.added ? "added as" : "is now"} ${r.role} of ${ctx.settings.org}/${ctx.settings.project}`);
      });
    });

const rmCommand = (deps: CommandDeps): Command =>
  new Command("rm")
    .description("remove a member from the project (admin): every connected account they granted here is disabled at once")
    .argument("<user>", "the user's name")
    .addHelpText("after", examples("flow member rm ann"))
    .action(async (user: string, _opts: unknown, cmd: Command) => {
      assertUserName(user);
      await withApi(deps, cmd, async (ctx) => {
        const r = await ctx.api.call<{ disabled: string[] }>("DELETE", scopedPath(ctx, "members", user));
        ctx.io.note(
          `${user} removed${r.disabled.length > 0 ? `; connected accounts disabled (reconnect them to use them again): ${r.disabled.join(", ")}` : ""}`,
        );
      });
    });

export const memberCommand = (deps: CommandDeps): Command => {
  const member = new Command("member")
    .description("manage who has which role on the project (admin): viewer, member, admin")
    .addHelpText("after", examples("flow member ls", "flow member set ann --role member", "flow member rm ann"));
  for (const sub of [lsCommand, setCommand, rmCommand]) member.addCommand(sub(deps));
  return member;
};
