/**
 * The approval form for a parked gate (issue 12, item 5). The approvals routes
 * (`GET {scoped}/runs/<run>/approvals`, `POST .../approvals/<gate>`) belong to the approvals work
 * (branch s4-approvals): the console shows the form only when this server has them (app.hasRoute),
 * and every rule (who may answer, required fields, select options, the approver recorded) stays in
 * that route; the page only shows its answer, a refusal inline at the field it names.
 */
import type { FastifyInstance } from "fastify";
import { csrfField, h, type Html } from "./html.js";
import { pbase, type Scoped } from "./pages.js";

export const APPROVALS_ROUTE = "/api/v1/orgs/:org/projects/:project/runs/:id/approvals";

export const approvalsAvailable = (app: FastifyInstance): boolean =>
  app.hasRoute({ method: "GET", url: APPROVALS_ROUTE }) && app.hasRoute({ method: "POST", url: `${APPROVALS_ROUTE}/:gate` });

/** A gate as the approvals route lists it. */
export interface Gate {
  gate: string;
  prompt: string;
  fields: Array<{
    name: string;
    type: "text" | "textarea" | "select";
    required?: boolean;
    options?: string[];
    default?: string;
    label?: string;
  }>;
}

/** A refused answer, shown at its gate with what was typed. */
export interface GateError {
  gate: string;
  message: string;
  values: Record<string, string>;
}

/** The form's answer: `field.<name>` inputs; an empty input is no answer, so the route can name a missing required field. */
export const answerOf = (form: Record<string, string>): { decision: string; fields: Record<string, string> } => {
  const fields: Record<string, string> = {};
  for (const [k, v] of Object.entries(form)) if (k.startsWith("field.") && v !== "") fields[k.slice("field.".length)] = v;
  return { decision: form.decision ?? "", fields };
};

const fieldInput = (gate: string, f: Gate["fields"][number], value: string | undefined, invalid: boolean): Html => {
  const id = `g-${gate}-${f.name}`;
  const common = h`id="${id}" name="field.${f.name}"${f.required ? h` required aria-required="true"` : ""}${invalid ? h` aria-invalid="true" aria-describedby="${id}-err"` : ""}`;
  const v = value ?? f.default ?? "";
  const input =
    f.type === "textarea"
      ? h`<textarea ${common} rows="4">${v}</textarea>`
      : f.type === "select"
        ? h`<select ${common}><option value="">choose…</option>${(f.options ?? []).map((o) => h`<option${o === v ? h` selected` : ""}>${o}</option>`)}</select>`
        : h`<input ${common} value="${v}">`;
  return h`<p><label for="${id}">${f.label ?? f.name}${f.required ? " (required)" : ""}</label><br>${input}</p>`;
};

export const gatesPanel = (s: Scoped, runId: string, gates: Gate[], error?: GateError): Html =>
  h`<section aria-labelledby="h-gates"><h2 id="h-gates">Approval</h2>${gates.map((g) => {
    const err = error?.gate === g.gate ? error : undefined;
    const bad = err ? /approval field "([^"]+)" is required/.exec(err.message)?.[1] : undefined;
    return h`<form method="post" action="${pbase(s)}/runs/${runId}/approvals/${g.gate}" class="gate" aria-label="gate ${g.gate}">
${csrfField(s.csrf)}<p><strong>${g.prompt}</strong> <span class="role">gate ${g.gate}</span></p>
${g.fields.map((f) => h`${fieldInput(g.gate, f, err?.values[f.name], bad === f.name)}${bad === f.name ? h`<span class="error" id="g-${g.gate}-${f.name}-err">${err!.message}</span>` : ""}`)}
${err && !bad ? h`<p class="error" role="alert">${err.message}</p>` : ""}
<button type="submit" name="decision" value="approve">Approve</button> <button type="submit" name="decision" value="reject" formnovalidate>Reject</button></form>`;
  })}</section>`;
