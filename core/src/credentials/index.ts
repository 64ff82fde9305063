export * from "./kinds.js";
export * from "./render.js";
export * from "./resolve.js";
