export * from "./providers.js";
export * from "./renewal.js";
