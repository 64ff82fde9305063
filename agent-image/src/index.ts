export {};
export * from "./client/index.js";
