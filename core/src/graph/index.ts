/** `@flowsvc/core/graph`: the graph document, its checks, expressions, planning and requirements. */
export * from "./model.js";
export * from "./expressions.js";
export * from "./node-configs.js";
export * from "./parse.js";
export * from "./plan.js";
export * from "./requirements.js";
export * from "./approval-fields.js";
export * from "./connectors.js";
// Both node-configs and approval-fields declare the same list; this names the one the package exports (merge fix).
export { APPROVAL_FIELD_TYPES } from "./approval-fields.js";
