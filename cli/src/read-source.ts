import { readFileSync } from "node:fs";
import { FlowError } from "@flowsvc/core/errors";

const readNow = (file: string): string => {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message;
    throw new FlowError("invalid_argument", `cannot read ${file}: ${reason}`, { hint: "give the path of the script to run", cause: err });
  }
};

/**
 * A script's text, or a usage-level error that says which file could not be read and why. Read
 * synchronously (node:fs, not node:fs/promises, and no callback): `flow submit`'s first asynchronous
 * read would start libuv's thread pool and cost a turn of the event loop before its request (issue 15).
 */
export const readSource = (file: string): Promise<string> => new Promise((resolve) => resolve(readNow(file)));
