// Label and field selectors as the apiserver parses them (k8s.io/apimachinery/pkg/labels, fields).
// Label: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, joined by commas.
// Field: `path=value`, `path==value`, `path!=value` over the fields a resource declares selectable.
import { badRequest } from "./api-error.js";

type Operator = "=" | "!=" | "in" | "notin" | "exists" | "!exists";

interface Requirement {
  key: string;
  op: Operator;
  values: string[];
}

export type Selector = (labels: Record<string, string>) => boolean;

/** Splits on commas that are not inside a parenthesised value set. */
const splitTerms = (text: string): string[] => {
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      terms.push(text.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(text.slice(start));
  return terms.map((t) => t.trim()).filter((t) => t !== "");
};

const KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

const checkKey = (key: string, term: string): string => {
  if (!KEY.test(key) || key.length > 316) throw badRequest(`unable to parse requirement: invalid label key "${key}" in "${term}"`);
  return key;
};

const checkValue = (value: string, term: string): string => {
  if (!VALUE.test(value) || value.length > 63) throw badRequest(`unable to parse requirement: invalid label value "${value}" in "${term}"`);
  return value;
};

const parseSetTerm = (term: string): Requirement | undefined => {
  const m = /^(\S+)\s+(in|notin)\s*\((.*)\)$/.exec(term);
  if (!m) return undefined;
  const values = m[3]!.split(",").map((v) => checkValue(v.trim(), term));
  return { key: checkKey(m[1]!, term), op: m[2] as Operator, values };
};

const parseTerm = (term: string): Requirement => {
  const set = parseSetTerm(term);
  if (set) return set;
  const m = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
  if (m) {
    const op: Operator = m[2] === "!=" ? "!=" : "=";
    return { key: checkKey(m[1]!, term), op, values: [checkValue(m[3]!.trim(), term)] };
  }
  if (term.startsWith("!")) return { key: checkKey(term.slice(1).trim(), term), op: "!exists", values: [] };
  return { key: checkKey(term, term), op: "exists", values: [] };
};

const matches = (r: Requirement, labels: Record<string, string>): boolean => {
  const has = Object.hasOwn(labels, r.key);
  const value = labels[r.key];
  switch (r.op) {
    case "=":
    case "in":
      return has && r.values.includes(value!);
    case "!=":
    case "notin":
      return !has || !r.values.includes(value!);
    case "exists":
      return has;
    case "!exists":
      return !has;
  }
};

/** Parses a labelSelector query value; an empty or absent one selects everything. */
export const parseLabelSelector = (text: string | null): Selector => {
  const requirements = splitTerms(text ?? "").map(parseTerm);
  return (labels) => requirements.every((r) => matches(r, labels));
};

export type FieldGetter = (obj: Record<string, unknown>) => string;

/** Reads a dotted path as the string the field selector compares with. */
export const fieldAt =
  (path: string): FieldGetter =>
  (obj) => {
    let cur: unknown = obj;
    for (const part of path.split(".")) cur = cur && typeof cur === "object" ? (cur as Record<string, unknown>)[part] : undefined;
    return typeof cur === "string" || typeof cur === "number" || typeof cur === "boolean" ? String(cur) : "";
  };

/** Parses a fieldSelector over the fields a resource supports (always metadata.name and metadata.namespace). */
export const parseFieldSelector = (text: string | null, supported: readonly string[]): ((obj: Record<string, unknown>) => boolean) => {
  const checks = splitTerms(text ?? "").map((term) => {
    const m = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw badRequest(`invalid selector: '${term}'; can't understand '${term}'`);
    const field = m[1]!;
    if (!supported.includes(field)) throw badRequest(`field label not supported: ${field}`);
    const get = fieldAt(field);
    const want = m[3]!.trim();
    const negate = m[2] === "!=";
    return (obj: Record<string, unknown>) => (get(obj) === want) !== negate;
  });
  return (obj) => checks.every((c) => c(obj));
};
