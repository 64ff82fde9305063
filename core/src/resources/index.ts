export * from "./refs.js";
export * from "./handler.js";
export * from "./hook.js";
export * from "./secret.js";
export * from "./run.js";
export * from "./status.js";
export * from "./resource-store.js";
export * from "./crds.js";
