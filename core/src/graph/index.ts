/** `@flowsvc/core/graph`: the graph document, its checks, expressions, planning and requirements. */
export * from "./model.js";
export * from "./expressions.js";
export * from "./node-configs.js";
export * from "./parse.js";
export * from "./plan.js";
export * from "./requirements.js";
export * from "./approval-fields.js";
export * from "./connectors.js";
