/**
 * Each node type's config (spec, "Graph document shape"; issue 10, "Node types"). A check returns
 * problems with paths relative to the node's `config` (`.url`, `.fields[1].options`); a problem
 * with the path "" is about the node's `type`.
 */
import { CONNECTOR_TYPE, NODE_TYPES } from "./model.js";
import { asConfigExpression } from "./expressions.js";

/** A connector's manifest as far as the graph check needs it (D's ConnectorManifest fits). */
export interface ManifestInfo {
  readonly type: string;
  readonly credential: { readonly kinds: readonly string[]; readonly required: boolean };
}

export interface NodeConfigContext {
  /** The manifest of a connector type (core/src/graph/connectors.ts's `connectorManifest`); absent: dotted types pass unchecked. */
  readonly manifestOf?: ((type: string) => ManifestInfo | undefined) | undefined;
}

export interface ConfigProblem {
  path: string;
  message: string;
}

const isString = (v: unknown): boolean => typeof v === "string";
/** A string, or a `$expr`/`$template` (whose value is checked when the node runs). */
const isStringOrExpr = (v: unknown): boolean => isString(v) || asConfigExpression(v) !== undefined;

const checkHttp = (config: Record<string, unknown>): ConfigProblem[] => {
  const problems: ConfigProblem[] = [];
  if (config["url"] === undefined) problems.push({ path: ".url", message: "required" });
  else if (!isStringOrExpr(config["url"])) problems.push({ path: ".url", message: "must be a string, or {$expr} / {$template}" });
  return problems;
};

const CHECKS: Partial<Record<string, (config: Record<string, unknown>, ctx: NodeConfigContext) => ConfigProblem[]>> = {
  http: checkHttp,
};

/** The problems of one node's config against its type. */
export const checkNodeConfig = (type: string, config: Record<string, unknown>, ctx: NodeConfigContext): ConfigProblem[] => {
  if ((NODE_TYPES as readonly string[]).includes(type)) return CHECKS[type]?.(config, ctx) ?? [];
  if (CONNECTOR_TYPE.test(type)) {
    if (!ctx.manifestOf || ctx.manifestOf(type)) return [];
    return [{ path: "", message: `no connector has type "${type}"` }];
  }
  return [
    {
      path: "",
      message: `unknown node type ${JSON.stringify(type)}; use one of ${NODE_TYPES.join(", ")} or a connector type (<service>.<action>)`,
    },
  ];
};
