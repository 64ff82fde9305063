/** `flow agents ls`: the agents the server knows (GET /api/v1/agents), local processes and agents holding jobs. */
import { formatAge } from "../print-format.js";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import { listFrom } from "./api-types.js";
import { withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

/** One agent as the server answers it (ingest/src/routes/agents.ts). */
export interface AgentRecord {
  id: string | null;
  where: "local" | "remote";
  pid: number | null;
  capabilities: string[];
  status: string;
  job_id: string | null;
  run_id: string | null;
  project: string | null;
  last_seen: string | null;
}

/** A live local process is seen "now" (the server's clock may be a hair ahead of this one's); others as an age. */
const lastSeen = (time: string | null, now: Date): string => {
  const ms = time === null ? NaN : now.getTime() - Date.parse(time);
  return Number.isFinite(ms) && ms < 1000 ? "now" : formatAge(time, now);
};

export const agentColumns = (now: Date): Array<Column<AgentRecord>> => [
  { header: "ID", value: (a) => a.id ?? "(not claimed yet)" },
  { header: "STATUS", value: (a) => a.status },
  { header: "CAPABILITIES", value: (a) => (a.capabilities.length ? a.capabilities.join(",") : "-") },
  // A busy agent whose run is in a project the caller is not a member of shows `(hidden)`.
  { header: "RUN", value: (a) => a.run_id ?? (a.status === "idle" ? "-" : "(hidden)") },
  { header: "PROJECT", value: (a) => a.project ?? "-" },
  { header: "LAST SEEN", value: (a) => lastSeen(a.last_seen, now) },
];

const listSpec: CommandSpec = {
  name: "ls",
  aliases: ["list"],
  description: "list the agents the server knows: its local agent processes (idle or busy) and every agent holding a job",
  options: [OUTPUT_OPTION],
  examples: ["flow agents ls", "flow agents ls -o json"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const agents = listFrom<AgentRecord>(await ctx.api.call("GET", "/api/v1/agents"), ["agents"]);
      printList(ctx.io, formatOf(opts), agents, {
        columns: agentColumns(ctx.now),
        empty: "no agents: none is running and none holds a job",
      });
    });
  },
};

export const agentsSpec: CommandSpec = {
  name: "agents",
  description: "inspect the server's agents",
  subcommands: [listSpec],
  examples: ["flow agents ls"],
};
