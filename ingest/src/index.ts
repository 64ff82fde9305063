export {};
export * from "./app.js";
export * from "./deps.js";
