export * from "./providers.js";
