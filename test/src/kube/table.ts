// Server-side printing: the meta.k8s.io/v1 Table kubectl asks for (`Accept: application/json;as=Table;
// v=v1;g=meta.k8s.io`). Columns are NAME plus the type's printer columns (a CRD's
// additionalPrinterColumns, evaluated as simple JSONPath).
import type { KubeObject } from "./api-error.js";
import { metaOf } from "./object-meta.js";
import type { PrinterColumn, ResourceType } from "./resource-types.js";

/** `.status.phase`, `.spec.items[0].name`, `{.status.x}`, `.status.conditions[?(@.type=="Ready")].status`: the path forms printer columns use. */
export const evalJsonPath = (obj: unknown, path: string): unknown => {
  const steps =
    path
      .replace(/^\{|\}$/g, "")
      .replace(/^\./, "")
      .match(/\[\?\(@\.\w+==(?:"[^"]*"|'[^']*')\)\]|[^.[\]]+|\[\d+\]/g) ?? [];
  let cur: unknown = obj;
  for (const step of steps) {
    if (cur === null || typeof cur !== "object") return undefined;
    // A filter picks the first element whose field equals the literal (a real apiserver prints all matches; conditions have one).
    const filter = /^\[\?\(@\.(\w+)==["'](.*)["']\)\]$/.exec(step);
    const index = /^\[(\d+)\]$/.exec(step);
    if (filter) cur = Array.isArray(cur) ? cur.find((e) => (e as Record<string, unknown> | null)?.[filter[1]!] === filter[2]) : undefined;
    else cur = index ? (Array.isArray(cur) ? cur[Number(index[1])] : undefined) : (cur as Record<string, unknown>)[step];
  }
  return cur;
};

/** kubectl's short age: k8s.io/apimachinery/pkg/util/duration.HumanDuration. */
export const humanAge = (sinceIso: string, now = Date.now()): string => {
  const ms = Date.parse(sinceIso);
  if (Number.isNaN(ms)) return "<invalid>";
  const s = Math.max(0, Math.floor((now - ms) / 1000));
  const m = Math.floor(s / 60);
  const h = Math.floor(s / 3600);
  const d = Math.floor(s / 86400);
  const pair = (big: number, bigUnit: string, small: number, smallUnit: string): string =>
    small === 0 ? `${big}${bigUnit}` : `${big}${bigUnit}${small}${smallUnit}`;
  if (s < 120) return `${s}s`;
  if (m < 10) return pair(m, "m", s % 60, "s");
  if (h < 3) return `${m}m`;
  if (h < 8) return pair(h, "h", m % 60, "m");
  if (h < 48) return `${h}h`;
  if (h < 192) return pair(d, "d", h % 24, "h");
  return d < 365 * 2 ? `${d}d` : `${Math.floor(d / 365)}y`;
};

const cellOf = (col: PrinterColumn, obj: KubeObject): unknown => {
  const v = evalJsonPath(obj, col.jsonPath);
  if (v === undefined || v === null) return null;
  if (col.type === "date" && typeof v === "string") return humanAge(v);
  if (typeof v === "object") return JSON.stringify(v);
  return v;
};

export type IncludeObject = "None" | "Metadata" | "Object";

const rowObject = (obj: KubeObject, include: IncludeObject): KubeObject | undefined => {
  if (include === "None") return undefined;
  if (include === "Object") return obj;
  return { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: obj.metadata };
};

export const toTable = (
  type: ResourceType,
  objects: KubeObject[],
  opts: { resourceVersion: string; include: IncludeObject },
): KubeObject => {
  const nameCol = { name: "Name", type: "string", format: "name", description: "Name must be unique within a namespace.", priority: 0 };
  const columns = type.columns.map((c) => ({
    name: c.name,
    type: c.type,
    format: c.format ?? "",
    description: c.description ?? "",
    priority: c.priority ?? 0,
  }));
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { resourceVersion: opts.resourceVersion },
    columnDefinitions: [nameCol, ...columns],
    rows: objects.map((obj) => {
      const object = rowObject(obj, opts.include);
      return { cells: [metaOf(obj).name, ...type.columns.map((c) => cellOf(c, obj))], ...(object ? { object } : {}) };
    }),
  };
};
