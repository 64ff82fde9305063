// The URL settings flow server and the deployables share (FLOWSVC_DATABASE_URL, FLOWSVC_PUBLIC_URL):
// one rule each, as portSetting is for ports.
import { z } from "zod";

/** A Postgres connection URL (postgres:// or postgresql://); `is required` when absent (add .optional() where it may be). */
export const databaseUrlSetting = () =>
  z.url({
    protocol: /^postgres(ql)?$/,
    error: (iss) => (iss.input === undefined ? "is required" : "must be a postgres:// URL"),
  });

/** The service's public base URL, as people and forges reach it: http(s) only (never javascript:, file:...). */
export const publicUrlSetting = () => z.url({ protocol: /^https?$/, error: "must be an http(s) URL" });
