/**
 * `flow event-hook set|ls|show|rm|rotate`: inbound hooks that turn outside deliveries into bus
 * events (spec "Event hook"). `set` and `rotate` are the only commands that ever print a hook's
 * shared secret, once: the server keeps only its digest.
 */
import { FlowError } from "@flowsvc/core/errors";
import { formatAge, formatDetails, formatDocument, formatTime } from "../print-format.js";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import type { Stdio } from "../print.js";
import { listFrom } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import type { CommandContext } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec } from "./spec.js";
import { stripOneNewline } from "./secret.js";
import { shellQuote } from "../shell-quote.js";

export interface HookView {
  name: string;
  mode: "token" | "manifest" | "hmac";
  event_type: string | null;
  manifest: string | null;
  hmac_header: string | null;
  hmac_prefix: string | null;
  emits: string | null;
  ingest_url: string;
  created_at: string;
  rotated_at: string | null;
  /** Only in the answers to a creating `set` and to `rotate`. */
  secret?: string;
  secret_kept?: boolean;
}

interface SetOptions {
  eventType?: string;
  manifest?: string;
  key?: string;
  hmacHeader?: string;
  hmacKey?: string;
  hmacPrefix?: string;
  output?: string;
}

/** A request that works as printed (with the secret or key filled in where a placeholder shows). */
export const sampleRequest = (hook: HookView): string => {
  const url = shellQuote(hook.ingest_url);
  if (hook.mode === "token") {
    const secret = hook.secret ? shellQuote(`X-Flow-Hook-Secret: ${hook.secret}`) : `"X-Flow-Hook-Secret: $FLOW_HOOK_SECRET"`;
    return `curl -X POST ${url} -H ${secret} -H 'Content-Type: application/json' -d '{"hello":"world"}'`;
  }
  const header = hook.mode === "manifest" ? "X-Hub-Signature-256" : (hook.hmac_header ?? "");
  const prefix = hook.mode === "manifest" ? "sha256=" : (hook.hmac_prefix ?? "");
  const extra = hook.mode === "manifest" ? ` -H 'X-GitHub-Event: ping' -H "X-GitHub-Delivery: $(date +%s%N)"` : "";
  return [
    `KEY=<the signing key>; body='{"zen":"hello"}'`,
    `curl -X POST ${url} -H 'Content-Type: application/json'${extra} \\`,
    `  -H "${header}: ${prefix}$(printf %s "$body" | openssl dgst -sha256 -hmac "$KEY" -r | cut -d' ' -f1)" -d "$body"`,
  ].join("\n");
};

const modeOf = (h: HookView): string =>
  h.mode === "manifest" ? `manifest ${h.manifest ?? ""}` : h.mode === "hmac" ? `hmac ${h.hmac_header ?? ""}` : "shared token";

/** What `set` and `rotate` print for people: the URL, the secret once, and a request to try. */
const printCreated = (io: Stdio, hook: HookView, what: string): void => {
  io.out(
    formatDetails([
      ["event hook", `${hook.name} ${what} (${modeOf(hook)})`],
      ["emits", hook.emits ?? "-"],
      ["ingest URL", hook.ingest_url],
      ["secret", hook.secret ?? "unchanged (not shown again)"],
    ]),
  );
  if (hook.secret)
    io.note(`the secret is shown only now: the server keeps its digest alone; \`flow event-hook rotate ${hook.name}\` mints a new one`);
  else io.note(`the hook kept its secret; \`flow event-hook rotate ${hook.name}\` mints a new one`);
  if (hook.mode !== "token")
    io.note("each delivery must be signed with the key; the secret is optional for signed hooks (a wrong one is refused)");
  io.out(
    `sample request:\n${sampleRequest(hook)
      .split("\n")
      .map((l) => `  ${l}`)
      .join("\n")}`,
  );
};

const readKey = async (io: Stdio, flag: string, value: string | undefined): Promise<string | undefined> => {
  if (value !== "-") return value;
  if (io.stdinIsTty()) io.note(`reading ${flag} from stdin; end it with Ctrl-D`);
  return stripOneNewline(await io.readStdin());
};

const setSpec: CommandSpec = {
  name: "set",
  description: "create an event hook, or replace its configuration keeping its secret (admin)",
  arguments: [{ name: "<name>", description: "the hook's name; its events are typed <name>.<event> for a manifest hook" }],
  options: [
    {
      flags: "--event-type <type>",
      description: "shared-token mode: the type every delivery is emitted as (with --hmac-*: overrides the default, the hook's name)",
    },
    {
      flags: "--manifest <manifest>",
      description: "built-in manifest mode (github): verify the forge's signature, derive the type per delivery",
    },
    { flags: "--key <signing_key>", description: "the manifest's signing key (the webhook secret on the forge); - reads it from stdin" },
    { flags: "--hmac-header <header>", description: "manual HMAC mode: the header carrying the signature" },
    { flags: "--hmac-key <key>", description: "manual HMAC mode: the HMAC-SHA256 key; - reads it from stdin" },
    { flags: "--hmac-prefix <prefix>", description: "manual HMAC mode: text before the hex digest in the header, e.g. sha256=" },
    OUTPUT_OPTION,
  ],
  examples: [
    "flow event-hook set deploys --event-type deploy.requested",
    "flow event-hook set gh --manifest github --key - < webhook-secret.txt",
    "flow event-hook set billing --hmac-header X-Signature --hmac-prefix sha256= --hmac-key - < key.txt",
  ],
  helpAfter: "\nA hook that exists keeps its secret when set again; `flow event-hook rotate <name>` mints a new one.\n",
  action: async (deps, { args: [name = ""], opts: options, flags }) => {
    const opts = options as SetOptions;
    if (opts.key === "-" && opts.hmacKey === "-")
      throw new FlowError("invalid_argument", "only one of --key and --hmac-key can read stdin");
    const key = await readKey(deps.io, "--key", opts.key);
    const hmacKey = await readKey(deps.io, "--hmac-key", opts.hmacKey);
    const body = {
      event_type: opts.eventType,
      manifest: opts.manifest,
      key,
      hmac_header: opts.hmacHeader,
      hmac_key: hmacKey,
      hmac_prefix: opts.hmacPrefix,
    };
    await withSettings(deps, flags, async (ctx) => {
      const hook = await ctx.api.call<HookView>("PUT", scopedPath(ctx, "event-hooks", name), body);
      const format = formatOf(opts);
      if (format !== "table") ctx.io.out(formatDocument(hook, format));
      else printCreated(ctx.io, hook, hook.secret ? "created" : "replaced");
    });
  },
};

const HOOK_COLUMNS = (now: Date): Array<Column<HookView>> => [
  { header: "NAME", value: (h) => h.name },
  { header: "MODE", value: modeOf },
  { header: "EMITS", value: (h) => h.emits ?? "-" },
  { header: "CREATED", value: (h) => formatAge(h.created_at, now) },
  { header: "INGEST URL", value: (h) => h.ingest_url },
];

const listSpec: CommandSpec = {
  name: "ls",
  aliases: ["list"],
  description: "list the project's event hooks (viewer); never their secrets or keys",
  options: [OUTPUT_OPTION],
  examples: ["flow event-hook ls", "flow event-hook ls -o json"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const hooks = listFrom<HookView>(await ctx.api.call("GET", scopedPath(ctx, "event-hooks")), ["hooks"]);
      printList(ctx.io, formatOf(opts), hooks, { columns: HOOK_COLUMNS(ctx.now), empty: "no event hooks" });
    });
  },
};

const printHook = (ctx: CommandContext, h: HookView): void =>
  ctx.io.out(
    formatDetails([
      ["name", h.name],
      ["mode", modeOf(h)],
      ["emits", h.emits ?? "-"],
      ...(h.mode === "hmac" ? [["hmac prefix", h.hmac_prefix || "(none)"] as const] : []),
      ["ingest URL", h.ingest_url],
      ["created", formatTime(h.created_at, ctx.now)],
      ["rotated", h.rotated_at ? formatTime(h.rotated_at, ctx.now) : "never"],
    ]),
  );

const showSpec: CommandSpec = {
  name: "show",
  description: "show one event hook: mode, what it emits, its ingest URL (viewer); never its secret or key",
  arguments: [{ name: "<name>", description: "the hook's name" }],
  options: [OUTPUT_OPTION],
  examples: ["flow event-hook show gh", "flow event-hook show gh -o json | jq -r .ingest_url"],
  action: async (deps, { args: [name = ""], opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const h = await ctx.api.call<HookView>("GET", scopedPath(ctx, "event-hooks", name));
      const format = formatOf(opts);
      if (format !== "table") ctx.io.out(formatDocument(h, format));
      else printHook(ctx, h);
    });
  },
};

const rmSpec: CommandSpec = {
  name: "rm",
  description: "remove an event hook (admin); its ingest URL answers 404 from then on, its events stay on the bus",
  arguments: [{ name: "<name>", description: "the hook's name" }],
  examples: ["flow event-hook rm gh"],
  action: async (deps, { args: [name = ""], flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      await ctx.api.call("DELETE", scopedPath(ctx, "event-hooks", name));
      ctx.io.note(`event hook ${name} removed`);
    });
  },
};

const rotateSpec: CommandSpec = {
  name: "rotate",
  description: "mint a new shared secret for an event hook (admin); the old one stops working at once",
  arguments: [{ name: "<name>", description: "the hook's name" }],
  options: [OUTPUT_OPTION],
  examples: ["flow event-hook rotate deploys", "flow event-hook rotate deploys -o json | jq -r .secret"],
  action: async (deps, { args: [name = ""], opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const hook = await ctx.api.call<HookView>("POST", scopedPath(ctx, "event-hooks", name, "rotate"));
      const format = formatOf(opts);
      if (format !== "table") ctx.io.out(formatDocument(hook, format));
      else printCreated(ctx.io, hook, "rotated");
    });
  },
};

export const eventHookSpec: CommandSpec = {
  name: "event-hook",
  description: "manage inbound event hooks: HTTP endpoints that turn outside deliveries into bus events",
  subcommands: [setSpec, listSpec, showSpec, rmSpec, rotateSpec],
  examples: ["flow event-hook set deploys --event-type deploy.requested", "flow event-hook ls", "flow event-hook rotate deploys"],
};
