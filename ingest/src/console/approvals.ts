/**
 * The approval form for a parked gate (issue 12, item 5), against the approvals route
 * (ingest/src/routes/approvals.ts: `GET {scoped}/runs/<run>/approvals` lists the gates a run is
 * parked on with their declared fields, `POST .../approvals/<gate>` answers one). Every rule (who
 * may answer, required fields, select options, the values' types, the approver recorded) stays in
 * that route: the form has no client-side `required` check (novalidate), so a missing field is the
 * route's refusal, shown inline at the field it names, and the run is not released.
 */
import type { ApprovalField } from "@flowsvc/core";
import { csrfField, h, type Html } from "./html.js";
import { pbase, type Scoped } from "./pages.js";

/** A gate as the approvals route lists it. */
export interface Gate {
  gate: string;
  prompt: string;
  fields: ApprovalField[];
  parked_since?: string | null;
  deadline_ms?: number;
}

/** The approvals route's list: `{run_id, gates}`. */
export interface GateList {
  run_id: string;
  gates: Gate[];
}

/** A refused answer, shown at its gate with what was typed. */
export interface GateError {
  gate: string;
  message: string;
  values: Record<string, string>;
}

/** The form's answer: `field.<name>` inputs; an empty input is no answer, so the route can name a missing required field. */
export const answerOf = (form: Record<string, string>): { decision: string; fields: Record<string, string> } => {
  // Own keys only (Object.fromEntries): a field named `__proto__` reaches the route, which refuses it, instead of vanishing.
  const fields = Object.fromEntries(
    Object.entries(form).flatMap(([k, v]) => (k.startsWith("field.") && v !== "" ? [[k.slice("field.".length), v] as const] : [])),
  );
  return { decision: form.decision ?? "", fields };
};

/**
 * A refusal of the route split by field: its first line holds every problem joined by `; `, each
 * naming its field (`approval field "env" is required`); the declared schema follows on the next
 * lines (the form already shows it). Problems naming no declared field go under `rest`.
 */
export const problemsByField = (message: string, fields: readonly ApprovalField[]): { byField: Map<string, string>; rest: string[] } => {
  const byField = new Map<string, string>();
  const rest: string[] = [];
  const names = new Set(fields.map((f) => f.name));
  for (const p of (message.split("\n")[0] ?? "").split("; ")) {
    const name = /^approval field "((?:[^"\\]|\\.)*)"/.exec(p)?.[1];
    if (name !== undefined && names.has(name) && !byField.has(name)) byField.set(name, p);
    else if (p !== "") rest.push(p);
  }
  return { byField, rest };
};

const fieldInput = (gate: string, f: ApprovalField, value: string | undefined, problem: string | undefined): Html => {
  const id = `g-${gate}-${f.name}`;
  const common = h`id="${id}" name="field.${f.name}"${f.required ? h` aria-required="true"` : ""}${problem ? h` aria-invalid="true" aria-describedby="${id}-err"` : ""}`;
  const v = value ?? f.default ?? "";
  const input =
    f.type === "textarea"
      ? h`<textarea ${common} rows="4">${v}</textarea>`
      : f.type === "select"
        ? h`<select ${common}><option value="">choose…</option>${(f.options ?? []).map((o) => h`<option${o === v ? h` selected` : ""}>${o}</option>`)}</select>`
        : h`<input ${common} value="${v}">`;
  return h`<p><label for="${id}">${f.label ?? f.name}${f.required ? " (required)" : ""}</label><br>${input}${
    problem ? h` <span class="error" id="${id}-err">${problem}</span>` : ""
  }</p>`;
};

const gateForm = (s: Scoped, runId: string, g: Gate, err: GateError | undefined): Html => {
  const { byField, rest } = err ? problemsByField(err.message, g.fields) : { byField: new Map<string, string>(), rest: [] };
  return h`<form method="post" action="${pbase(s)}/runs/${runId}/approvals/${g.gate}" class="gate" aria-label="gate ${g.gate}" novalidate>
${csrfField(s.csrf)}<p><strong>${g.prompt}</strong> <span class="role">gate ${g.gate}</span></p>
${err ? h`<p class="error" role="alert" id="g-${g.gate}-error">not answered: ${rest.length ? rest.join("; ") : "see the fields below"}</p>` : ""}
${g.fields.map((f) => fieldInput(g.gate, f, err?.values[f.name], byField.get(f.name)))}
<button type="submit" name="decision" value="approve">Approve</button> <button type="submit" name="decision" value="reject">Reject</button></form>`;
};

export const gatesPanel = (s: Scoped, runId: string, gates: Gate[], o: { error?: GateError | undefined; readOnly?: boolean } = {}): Html =>
  h`<section aria-labelledby="h-gates"><h2 id="h-gates">Approval</h2>${gates.map((g) =>
    o.readOnly
      ? h`<p class="gate"><strong>${g.prompt}</strong> <span class="role">gate ${g.gate}</span>: waits for a member's answer</p>`
      : gateForm(s, runId, g, o.error?.gate === g.gate ? o.error : undefined),
  )}</section>`;
