export * from "./oauth-client.js";
export * from "./renewal-loop.js";
export * from "./sending-fetch.js";
