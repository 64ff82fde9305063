export * from "./errors.js";
export * from "./ids.js";
export * from "./agent-api.js";
