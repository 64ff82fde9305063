export {};
export * from "./cli-config.js";
