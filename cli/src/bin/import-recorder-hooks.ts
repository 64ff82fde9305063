/** The resolve hook of import-recorder.ts: runs in the loader thread, appends each resolved URL to the log. */
import { appendFileSync } from "node:fs";

interface ResolveResult {
  url: string;
}
type NextResolve = (specifier: string, context: unknown) => Promise<ResolveResult>;

let log = "";

export const initialize = (data: { log: string }): void => {
  log = data.log;
};

export const resolve = async (specifier: string, context: unknown, next: NextResolve): Promise<ResolveResult> => {
  const result = await next(specifier, context);
  if (log) appendFileSync(log, `${result.url}\n`);
  return result;
};
