/**
 * `flow user add <name> --role <role>` (README "Roles"; admin): a new person on the server, with a
 * role on the project and their first API token (POST {scoped}/users). The token is printed alone
 * on stdout, so `TOKEN=$(flow user add ann --role member)` takes it; it is shown this once (the
 * server keeps its digest only). An existing user joins another project with `flow member set`.
 */
import { ROLES, assertUserName } from "@flowsvc/core/members";
import { formatDocument } from "../print-format.js";
import { scopedPath, withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

interface NewUser {
  user: string;
  role: string;
  token: string;
  token_id: string;
}

const addSpec: CommandSpec = {
  name: "add",
  description: "add a user with a role on the project and print their first API token, shown once (admin)",
  arguments: [{ name: "<name>", description: "the new user's name (letters, digits, . _ @ + -)" }],
  options: [{ flags: "--role <role>", description: "the role on the project", choices: ROLES, mandatory: true }, OUTPUT_OPTION],
  examples: ["TOKEN=$(flow user add ann --role member)", "flow user add ci-bot --role viewer -o json"],
  action: async (deps, { args: [name = ""], opts, flags }) => {
    const { role } = opts as { role: string };
    assertUserName(name);
    await withSettings(deps, flags, async (ctx) => {
      const r = await ctx.api.call<NewUser>("POST", scopedPath(ctx, "users"), { name, role });
      const format = formatOf(opts);
      ctx.io.out(format === "table" ? r.token : formatDocument(r, format));
      ctx.io.note(
        `${r.user} added as ${r.role} of ${ctx.settings.org}/${ctx.settings.project}; their API token (${r.token_id}) is shown only now: ` +
          "the server keeps its digest alone. They log in with `flow login --token <token>` and make more with `flow token create`",
      );
    });
  },
};

export const userSpec: CommandSpec = {
  name: "user",
  description: "add people to the server (admin): a user, their role on the project and their first API token",
  subcommands: [addSpec],
  examples: ["flow user add ann --role member", "flow member set ann --role admin --project acme/web"],
};
