/** The console's pages as pure functions of what the user API answered (routes.ts fetches it). */
import { RUN_STATUSES, isTerminalStatus } from "@flowsvc/core";
import type { RunView } from "@flowsvc/store";
import { csrfField, esc, h, md, text, type Html } from "./html.js";

export const STATUSES = RUN_STATUSES;

export interface Scoped {
  org: string;
  project: string;
  csrf: string;
}

export const pbase = (s: { org: string; project: string }): string => `/p/${encodeURIComponent(s.org)}/${encodeURIComponent(s.project)}`;

const when = (t: string | null | undefined): Html => (t ? h`<time datetime="${t}">${t.replace("T", " ").slice(0, 19)}</time>` : h`–`);

const status = (s: string, runId?: string): Html =>
  h`<span class="status status-${s}"${runId ? h` data-run-status="${runId}"` : ""}>${s}</span>`;

export const loginPage = (o: { loginCsrf: string; error?: string }): Html => h`
<p>Log in with an API token (the one <code>flow server</code> printed at its first start, or one from <code>flow login</code>).
The token is exchanged for a session; it is not kept in the browser.</p>
${o.error ? h`<p class="error" role="alert" id="login-error">${o.error}</p>` : ""}
<form method="post" action="/login" class="login">
<input type="hidden" name="csrf" value="${o.loginCsrf}">
<label for="token">API token</label>
<input id="token" name="token" type="password" autocomplete="off" required maxlength="512"${o.error ? h` aria-describedby="login-error"` : ""}>
<button type="submit">Log in</button></form>`;

export const projectsPage = (o: { user: string; projects: Array<{ org: string; project: string; role: string }> }): Html => h`
<p>Logged in as <strong>${o.user}</strong>.</p>
${
  o.projects.length === 0
    ? h`<p>You are not a member of any project.</p>`
    : h`<ul class="projects">${o.projects.map(
        (p) => h`<li><a href="${pbase(p)}/runs">${p.org}/${p.project}</a> <span class="role">${p.role}</span></li>`,
      )}</ul>`
}`;

export interface RunsFilter {
  status?: string | undefined;
  tag?: string | undefined;
  handler?: string | undefined;
}

const filterForm = (f: RunsFilter): Html => h`
<form method="get" class="filters" role="search" aria-label="filter runs">
<label for="f-status">Status</label><select id="f-status" name="status"><option value="">any</option>${STATUSES.map(
  (s) => h`<option${f.status === s ? h` selected` : ""}>${s}</option>`,
)}</select>
<label for="f-tag">Tag</label><input id="f-tag" name="tag" value="${f.tag ?? ""}" maxlength="128">
<label for="f-handler">Handler</label><input id="f-handler" name="handler" value="${f.handler ?? ""}" maxlength="128">
<button type="submit">Filter</button></form>`;

export const runsPage = (s: Scoped, f: RunsFilter, runs: RunView[], liveUrl: string): Html => h`
${filterForm(f)}
<table class="runs" data-live-runs="${liveUrl}"><caption>${runs.length} runs, newest first; statuses update live</caption>
<thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">File</th><th scope="col">Tags</th><th scope="col">Trigger</th><th scope="col">Created</th></tr></thead>
<tbody>${runs.map(
  (r) => h`<tr><td><a href="${pbase(s)}/runs/${r.id}">${r.id}</a></td><td>${status(r.status, r.id)}</td><td>${r.filename}</td>
<td>${r.tags.join(", ")}</td><td>${text(r.trigger.type)}</td><td>${when(r.created_at)}</td></tr>`,
)}</tbody></table>`;

export interface JournalRow {
  position: number;
  kind: string;
  name: string;
  ordinal: number;
  status: string;
  exit_code: number | null;
  output_bytes: number | null;
  error?: string;
}

/** A viewer's run page offers no Cancel, Rerun or gate answers: the API would refuse them (`this needs the member role`). */
const READ_ONLY_NOTE = "You are a viewer of this project: cancelling, rerunning and answering a gate need the member role.";

const journal = (s: Scoped, runId: string, steps: JournalRow[], readOnly: boolean): Html => h`
<section aria-labelledby="h-steps"><h2 id="h-steps">Journal of steps</h2>
${
  steps.length === 0
    ? h`<p>No steps recorded.</p>`
    : h`<table><thead><tr><th scope="col">#</th><th scope="col">Kind</th><th scope="col">Step</th><th scope="col">Status</th><th scope="col">Exit</th><th scope="col">Output</th><th scope="col">Rerun</th></tr></thead><tbody>${steps.map(
        (e) => h`<tr><td>${e.position}</td><td>${e.kind}</td><td>${e.name}#${e.ordinal}</td><td>${status(e.status)}${
          e.error ? h` <span class="error">${e.error}</span>` : ""
        }</td><td>${e.exit_code ?? "–"}</td><td>${e.output_bytes === null ? "–" : `${e.output_bytes} B`}</td>
<td>${
          readOnly
            ? "–"
            : h`<form method="post" action="${pbase(s)}/runs/${runId}/rerun">${csrfField(s.csrf)}<input type="hidden" name="from" value="${`${e.name}#${e.ordinal}`}"><button type="submit">Rerun from here</button></form>`
        }</td></tr>`,
      )}</tbody></table>`
}</section>`;

const activities = (list: Array<{ name: string; status: string; exit_code: number | null }>): Html => h`
<section aria-labelledby="h-act"><h2 id="h-act">Activities</h2>
${
  list.length === 0
    ? h`<p>No activities.</p>`
    : h`<table><thead><tr><th scope="col">Activity</th><th scope="col">Status</th><th scope="col">Exit</th></tr></thead><tbody>${list.map(
        (a) => h`<tr><td>${a.name}</td><td>${status(a.status)}</td><td>${a.exit_code ?? "–"}</td></tr>`,
      )}</tbody></table>`
}</section>`;

const trigger = (s: Scoped, run: RunView): Html => {
  const event = typeof run.trigger.event === "string" ? run.trigger.event : undefined;
  return h`<section aria-labelledby="h-trigger"><h2 id="h-trigger">Started by</h2>
<p>${text(run.trigger.type)}${event ? h` event <a href="${pbase(s)}/events/${event}">${event}</a>` : ""}${
    run.rerun_of ? h` · rerun of <a href="${pbase(s)}/runs/${run.rerun_of}">${run.rerun_of}</a>` : ""
  }${run.parent_run_id ? h` · child of <a href="${pbase(s)}/runs/${run.parent_run_id}">${run.parent_run_id}</a>` : ""}</p>
<pre class="json">${JSON.stringify(run.trigger, null, 2)}</pre></section>`;
};

/** A graph run's node as `GET runs/<id>` answers it (store's GraphNodeView, masked). */
export interface NodeRow {
  node_id: string;
  type: string;
  status: string;
  attempt: number;
  output: unknown;
  error: string | null;
}

/** An approval node's answer as `flow status` shows it: who approved or rejected it, or that it timed out. */
export const gateAnswer = (n: NodeRow): string | undefined => {
  if (n.type !== "approval" || n.output === null || typeof n.output !== "object") return undefined;
  const out = n.output as { decision?: unknown; approved_by?: unknown; timed_out?: unknown };
  if (out.timed_out === true) return "timed out";
  if (typeof out.approved_by !== "string") return undefined;
  return `${out.decision === "reject" ? "rejected" : "approved"} by ${out.approved_by}`;
};

/** A graph run's nodes in place of the journal: each one's status, its gate's approver, and its output. */
const nodesPanel = (nodes: NodeRow[]): Html => h`
<section aria-labelledby="h-nodes"><h2 id="h-nodes">Nodes</h2>
<table><thead><tr><th scope="col">Node</th><th scope="col">Type</th><th scope="col">Status</th><th scope="col">Output</th></tr></thead><tbody>${nodes.map(
  (n) => h`<tr data-node="${n.node_id}"><td>${n.node_id}</td><td>${n.type}</td><td>${status(n.status)}${
    n.attempt > 1 ? ` · attempt ${n.attempt}` : ""
  }${gateAnswer(n) ? h` <span class="approver">${gateAnswer(n)}</span>` : ""}${n.error ? h` <span class="error">${n.error}</span>` : ""}</td>
<td>${n.output === null || n.output === undefined ? "–" : h`<pre class="json">${JSON.stringify(n.output, null, 2)}</pre>`}</td></tr>`,
)}</tbody></table></section>`;

export interface RunPageData {
  run: RunView & { activities: Array<{ name: string; status: string; exit_code: number | null }>; nodes?: NodeRow[] };
  steps: JournalRow[];
  /** Approval gates parked on this run, when the approvals route exists (approvals.ts). */
  gates?: Html;
  /** The caller is a viewer: the page offers nothing that changes the run. */
  readOnly?: boolean;
}

export const runPage = (s: Scoped, d: RunPageData): Html => {
  const { run } = d;
  const runUrl = `${pbase(s)}/runs/${run.id}`;
  return h`
<p class="run-head">${status(run.status, run.id)} ${run.filename} · attempt ${run.attempt} · created ${when(run.created_at)}${
    run.tags.length ? h` · tags ${run.tags.join(", ")}` : ""
  }</p>
${
  d.readOnly
    ? h`<p class="note" id="read-only">${READ_ONLY_NOTE}</p>`
    : isTerminalStatus(run.status)
      ? ""
      : h`<form method="post" action="${runUrl}/cancel" class="inline">${csrfField(s.csrf)}<button type="submit" id="cancel">Cancel run</button></form>`
}
${run.error ? h`<p class="error">${run.error}</p>` : ""}
${d.gates ?? ""}
<section aria-labelledby="h-log"><h2 id="h-log">Log</h2>
<div id="log" class="log" tabindex="0" role="log" aria-label="run log (scroll with the arrow keys, Page Up/Down, Home and End)"
 data-log-url="${runUrl}/log.json" data-events-url="${runUrl}/log.events" data-held="0"><div class="log-spacer"></div><div class="log-rows"></div></div>
<p class="log-meta" aria-live="polite"><span id="log-count">0</span> lines <label><input type="checkbox" id="log-follow" checked> follow</label></p>
</section>
<section aria-labelledby="h-ann"><h2 id="h-ann">Annotations</h2>${
    run.annotations.length === 0
      ? h`<p>None.</p>`
      : run.annotations.map((a) => h`<article class="annotation">${md(a.markdown)}<footer>${when(a.at)}</footer></article>`)
  }</section>
${run.output ? h`<section aria-labelledby="h-out"><h2 id="h-out">Output</h2><pre class="json">${JSON.stringify(run.output, null, 2)}</pre></section>` : ""}
${run.nodes ? nodesPanel(run.nodes) : journal(s, run.id, d.steps, d.readOnly === true)}
${activities(run.activities)}
${trigger(s, run)}`;
};

export const table = (o: { caption: string; cols: string[]; rows: Array<Array<Html | string | number | null | undefined>> }): Html =>
  o.rows.length === 0
    ? h`<p>${o.caption}: none.</p>`
    : h`<table><caption>${o.caption}</caption><thead><tr>${o.cols.map((c) => h`<th scope="col">${c}</th>`)}</tr></thead><tbody>${o.rows.map(
        (r) => h`<tr>${r.map((c) => h`<td>${c ?? "–"}</td>`)}</tr>`,
      )}</tbody></table>`;

export const errorPage = (message: string): Html => h`<p class="error" role="alert">${message}</p><p><a href="/">Back to projects</a></p>`;

export { esc, when };
