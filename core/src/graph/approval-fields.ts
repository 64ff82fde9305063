/**
 * An approval gate's fields (spec, "Graph document shape": `approval` config `fields`, "Approval
 * gates and model-assisted deploys"; SECURITY.md "Approval gates"). Two rules live here and nowhere
 * else: what a field declaration may be (parseApprovalFields: the approval node's executor, the
 * approvals route and `flow approve` read a node's `fields` through it), and what an answer must be
 * (checkApprovalFields: the approvals route refuses a bad answer with its message, and the run
 * stays parked).
 *
 * Checked by hand, not with zod: `flow approve` runs these rules to prompt, and a `flow` command
 * does not load zod (cli/src/bin/flow-imports.test.ts). Messages name the field, never more than a
 * short quoted excerpt of a value.
 */
import { textProblem } from "../json-guard.js";

export const APPROVAL_FIELD_TYPES = ["text", "textarea", "select"] as const;
export type ApprovalFieldType = (typeof APPROVAL_FIELD_TYPES)[number];

export interface ApprovalField {
  name: string;
  type: ApprovalFieldType;
  required?: boolean;
  options?: string[];
  default?: string;
  /** What a person is shown instead of the name. */
  label?: string;
}

/** Most fields one gate may declare. */
export const APPROVAL_FIELDS_MAX = 50;
/** Longest field name; names are identifiers, so `nodes.<gate>.output.<name>` reads them in CEL. */
export const APPROVAL_FIELD_NAME_MAX = 64;
/** Most options a select may offer. */
export const APPROVAL_OPTIONS_MAX = 100;
/** Longest option and label, in characters. */
export const APPROVAL_OPTION_MAX = 256;
/** Longest `text` or `select` answer (and option), in characters. */
export const APPROVAL_TEXT_MAX = 4096;
/** Longest `textarea` answer, in characters: a few pages of notes; anything larger belongs in an artifact. */
export const APPROVAL_TEXTAREA_MAX = 64 * 1024;

/** A field name, as a node id is spelled (CEL reads `nodes.<gate>.output.<name>`, or `["a-b"]` with a `-`). */
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/;
/** Names an answer may not use: they would collide with what the route adds, or with Object's own keys. */
const RESERVED_NAMES: readonly string[] = ["decision", "approved_by", "timed_out", "__proto__", "constructor", "prototype"];

/** A value as a message may show it: quoted, escaped, cut short. */
const shown = (value: string): string => JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}...` : value);

const maxLengthOf = (type: ApprovalFieldType): number => (type === "textarea" ? APPROVAL_TEXTAREA_MAX : APPROVAL_TEXT_MAX);

/** Why a text (an answer, an option, a default) cannot be used; undefined when it can. */
const textValueProblem = (value: string, max: number): string | undefined => {
  if (value.length > max) return `is ${value.length} characters long; at most ${max} are allowed`;
  return textProblem(value);
};

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const nameProblem = (name: unknown): string | undefined => {
  if (typeof name !== "string") return "name: required, a string";
  if (name.length > APPROVAL_FIELD_NAME_MAX) return `name: at most ${APPROVAL_FIELD_NAME_MAX} characters; this one has ${name.length}`;
  if (!FIELD_NAME.test(name))
    return `name: ${shown(name)} is not allowed: use ASCII letters, digits, "_" and "-", starting with a letter or "_"`;
  if (RESERVED_NAMES.includes(name)) return `name: ${shown(name)} is reserved (the answer carries it)`;
  return undefined;
};

const optionsProblems = (options: unknown): string[] => {
  if (!Array.isArray(options) || options.length === 0) return ["options: a select needs a non-empty array of strings"];
  if (options.length > APPROVAL_OPTIONS_MAX) return [`options: at most ${APPROVAL_OPTIONS_MAX}; ${options.length} were given`];
  const problems: string[] = [];
  options.forEach((o, i) => {
    const p = typeof o === "string" ? textValueProblem(o, APPROVAL_OPTION_MAX) : "must be a string";
    if (p !== undefined) problems.push(`options[${i}]: ${p}`);
    else if (o === "") problems.push(`options[${i}]: is empty`);
  });
  if (problems.length === 0 && new Set(options).size !== options.length) problems.push("options: an option appears twice");
  return problems;
};

const defaultProblem = (field: Record<string, unknown>, type: ApprovalFieldType): string | undefined => {
  const d = field["default"];
  if (d === undefined) return undefined;
  if (typeof d !== "string") return "default: must be a string";
  const p = textValueProblem(d, maxLengthOf(type));
  if (p !== undefined) return `default: ${p}`;
  const options = field["options"];
  if (type === "select" && Array.isArray(options) && !options.includes(d)) return `default: ${shown(d)} is not one of the options`;
  return undefined;
};

const KNOWN_KEYS: readonly string[] = ["name", "type", "required", "options", "default", "label"];

const labelProblem = (label: unknown): string | undefined => {
  if (label === undefined) return undefined;
  if (typeof label !== "string") return "label: must be a string";
  const p = textValueProblem(label, APPROVAL_OPTION_MAX);
  return p === undefined ? undefined : `label: ${p}`;
};

/** The problems of one declaration, each without its place (the caller prefixes `fields[i].`). */
const declarationProblems = (field: unknown): string[] => {
  if (!isRecord(field)) return ["must be an object {name, type, required, options, default, label}"];
  const problems: string[] = [];
  const n = nameProblem(field["name"]);
  if (n !== undefined) problems.push(n);
  for (const key of Object.keys(field))
    if (!KNOWN_KEYS.includes(key)) problems.push(`${key}: not a field property (${KNOWN_KEYS.join(", ")})`);
  const type = field["type"];
  if (!APPROVAL_FIELD_TYPES.includes(type as ApprovalFieldType)) {
    problems.push(`type: must be one of ${APPROVAL_FIELD_TYPES.join(", ")}`);
    return problems;
  }
  if (field["required"] !== undefined && typeof field["required"] !== "boolean") problems.push("required: must be true or false");
  if (type === "select") problems.push(...optionsProblems(field["options"]));
  else if (field["options"] !== undefined) problems.push(`options: only a select has options, this field is a ${String(type)}`);
  const d = defaultProblem(field, type as ApprovalFieldType);
  if (d !== undefined) problems.push(d);
  const l = labelProblem(field["label"]);
  if (l !== undefined) problems.push(l);
  return problems;
};

const cleanField = (f: Record<string, unknown>): ApprovalField => ({
  name: f["name"] as string,
  type: f["type"] as ApprovalFieldType,
  ...(f["required"] === true ? { required: true } : {}),
  ...(Array.isArray(f["options"]) ? { options: [...(f["options"] as string[])] } : {}),
  ...(typeof f["default"] === "string" ? { default: f["default"] } : {}),
  ...(typeof f["label"] === "string" ? { label: f["label"] } : {}),
});

export type ApprovalFieldsParse = { ok: true; fields: ApprovalField[] } | { ok: false; problems: Array<{ path: string; message: string }> };

/**
 * A gate's `fields` declaration (absent: no fields), checked whole. Each problem carries its path
 * under `where` (`nodes[2].config.fields[0].type`), as GraphProblem does.
 */
export const parseApprovalFields = (value: unknown, where = "fields"): ApprovalFieldsParse => {
  if (value === undefined || value === null) return { ok: true, fields: [] };
  if (!Array.isArray(value)) return { ok: false, problems: [{ path: where, message: "must be an array of fields" }] };
  if (value.length > APPROVAL_FIELDS_MAX)
    return { ok: false, problems: [{ path: where, message: `at most ${APPROVAL_FIELDS_MAX} fields; ${value.length} were given` }] };
  const problems: Array<{ path: string; message: string }> = [];
  const seen = new Set<string>();
  value.forEach((field, i) => {
    for (const p of declarationProblems(field)) {
      const at = p.indexOf(": ");
      const key = p.slice(0, at);
      const known = at > 0 && /^[A-Za-z_[\]0-9]+$/.test(key);
      problems.push(known ? { path: `${where}[${i}].${key}`, message: p.slice(at + 2) } : { path: `${where}[${i}]`, message: p });
    }
    const name = isRecord(field) ? field["name"] : undefined;
    if (typeof name === "string") {
      if (seen.has(name)) problems.push({ path: `${where}[${i}].name`, message: `${shown(name)} is declared twice` });
      seen.add(name);
    }
  });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, fields: value.map((f) => cleanField(f as Record<string, unknown>)) };
};

/** The schema as the refusal shows it: the declarations, as JSON. */
export const approvalFieldsSchemaText = (fields: readonly ApprovalField[]): string => JSON.stringify({ fields }, null, 2);

/**
 * A submitted value converted to the field's declared type: every declared type holds text, so a
 * string stays as it is and a JSON number or boolean (`--field count=3` arrives as text; an HTTP
 * client may send 3) becomes its text. Anything else is no answer to a text field.
 */
const convert = (value: unknown): string | undefined => {
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  if (typeof value === "boolean") return String(value);
  return undefined;
};

/** One field's answer: the converted value, undefined when not given, or a problem sentence. */
const answerOf = (field: ApprovalField, raw: unknown): { value?: string } | { problem: string } => {
  if (raw === undefined || raw === null) return {};
  const value = convert(raw);
  const label = `approval field ${JSON.stringify(field.name)}`;
  if (value === undefined) return { problem: `${label} must be a string (a ${field.type} field)` };
  const p = textValueProblem(value, maxLengthOf(field.type));
  if (p !== undefined) return { problem: `${label} ${p}` };
  if (field.type === "select" && value !== "" && !(field.options ?? []).includes(value))
    return { problem: `${label} must be one of ${(field.options ?? []).map(shown).join(", ")}; got ${shown(value)}` };
  return value === "" ? {} : { value };
};

export type ApprovalFieldsCheck = { ok: true; output: Record<string, unknown> } | { ok: false; message: string };

/**
 * An answer to a gate, against its declared fields. `submitted` is the answer's `fields` object
 * (HTTP) or the `--field name=value` pairs (CLI). A field not given (or given empty) takes its
 * default; a required field with neither is refused with exactly `approval field "<name>" is
 * required` followed, on the next lines, by the full field schema (spec, Errors). A value of the
 * wrong type, outside a select's options, over its length limit, or holding NUL or a lone surrogate
 * is refused, and so is a field the gate does not declare (a typo is not dropped silently). Every
 * problem is reported at once. On success the output holds every declared field: its answer, its
 * default, or "" for an optional field left empty, so `nodes.<gate>.output.<field>` always reads.
 */
export const checkApprovalFields = (fields: readonly ApprovalField[], submitted: Record<string, unknown>): ApprovalFieldsCheck => {
  const problems: string[] = [];
  const output = new Map<string, string>();
  const declared = new Set(fields.map((f) => f.name));
  for (const key of Object.keys(submitted)) {
    if (!declared.has(key)) problems.push(`approval field ${shown(key)} is not declared by this gate`);
  }
  for (const field of fields) {
    const answer = answerOf(field, Object.hasOwn(submitted, field.name) ? submitted[field.name] : undefined);
    if ("problem" in answer) problems.push(answer.problem);
    else if (answer.value !== undefined) output.set(field.name, answer.value);
    else if (field.default !== undefined && field.default !== "") output.set(field.name, field.default);
    else if (field.required === true) problems.push(`approval field ${JSON.stringify(field.name)} is required`);
    else output.set(field.name, "");
  }
  if (problems.length > 0) return { ok: false, message: `${problems.join("; ")}\n${approvalFieldsSchemaText(fields)}` };
  return { ok: true, output: Object.fromEntries(output) };
};

/**
 * `--field name=value` flags as an answer: split at the first `=` (a value may hold `=`); a flag
 * without `=` or with an empty name is refused; a name given twice is refused rather than one
 * silently winning.
 */
export const parseFieldFlags = (
  flags: readonly string[],
): { ok: true; fields: Record<string, string> } | { ok: false; message: string } => {
  const fields = new Map<string, string>();
  for (const flag of flags) {
    const at = flag.indexOf("=");
    if (at <= 0) return { ok: false, message: `--field ${shown(flag)}: expected <name>=<value>` };
    const name = flag.slice(0, at);
    if (fields.has(name)) return { ok: false, message: `--field ${shown(name)} is given twice` };
    fields.set(name, flag.slice(at + 1));
  }
  return { ok: true, fields: Object.fromEntries(fields) };
};
