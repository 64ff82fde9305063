/**
 * `flow emit <type>` outside a script: appends an event to the project's bus and prints its id.
 * Inside a script bin/flow.ts hands `emit` to the in-script client instead (checkpointed there).
 */
import { FlowError } from "@flowsvc/core/errors";
import type { Settings } from "../config.js";
import { scopedPath, withSettings } from "./context.js";
import { parseJsonFlag } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

interface EmitOptions {
  key?: string;
  payload?: unknown;
}

/** A not_found on emit is a missing project or a server without the emit route: say both. */
const withNotFoundHint = (err: unknown, settings: Settings): unknown =>
  err instanceof FlowError && err.code === "not_found" && !err.hint
    ? new FlowError("not_found", err.message, {
        hint: `check that project ${settings.org}/${settings.project} exists (--project), or upgrade the server: emitting over HTTP needs a flowsvc with POST .../events`,
        cause: err,
      })
    : err;

export const emitSpec: CommandSpec = {
  name: "emit",
  description: "publish an event on the project's bus and print its id",
  arguments: [{ name: "<type>", description: "the event type: 1-64 of A-Z a-z 0-9 . _ - (run.*, flow.* and a few others are reserved)" }],
  options: [
    { flags: "--key <subject>", description: "the event's subject, e.g. a repository; none means broadcast" },
    { flags: "--payload <json>", description: "the payload, valid JSON (default null)", parse: parseJsonFlag },
  ],
  examples: ['flow emit deploy.requested --key acme/web --payload \'{"ref":"main"}\'', "id=$(flow emit nightly.done)"],
  action: async (deps, { args: [type = ""], opts, flags }) => {
    const { key, payload } = opts as EmitOptions;
    await withSettings(deps, flags, async (ctx) => {
      const body = { type, ...(key === undefined ? {} : { key }), payload: payload ?? null };
      const answer = await ctx.api
        .call<{ id?: string; event_id?: string; declined?: Array<{ handler: string; error: string }> }>(
          "POST",
          scopedPath(ctx, "events"),
          body,
        )
        .catch((err: unknown) => {
          throw withNotFoundHint(err, ctx.settings);
        });
      const id = answer?.id ?? answer?.event_id;
      if (!id) throw new FlowError("internal", "the server accepted the event but did not answer its id");
      ctx.io.out(id);
      // A handler that matched but starts no run for this event says why (stderr: stdout stays the id).
      for (const d of answer?.declined ?? []) ctx.io.note(`handler ${d.handler} declined the event: ${d.error}`);
    });
  },
};
