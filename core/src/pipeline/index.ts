/** `@flowsvc/core/pipeline`: the pipeline document (`flowsvc/pipeline/v1`), its YAML parse with positions, and its compiler to a graph. */
export * from "./model.js";
export * from "./expressions.js";
export * from "./parse.js";
export * from "./compile.js";
export * from "./log-prefix.js";
export * from "./concurrency.js";
