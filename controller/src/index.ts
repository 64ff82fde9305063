export {};
export * from "./launcher.js";
export * from "./local-launcher.js";
export * from "./agent-work-root.js";
export * from "./dispatcher.js";
export * from "./timers.js";
export * from "./config.js";
export * from "./accounts/index.js";
