import { readFile } from "node:fs";
import { FlowError } from "@flowsvc/core/errors";

/** A script's text, or a usage-level error that says which file could not be read and why. */
export const readSource = async (file: string): Promise<string> => {
  try {
    // node:fs, not node:fs/promises: `flow submit` would load the latter for this one read (issue 15).
    return await new Promise<string>((resolve, reject) => readFile(file, "utf8", (err, data) => (err ? reject(err) : resolve(data))));
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message;
    throw new FlowError("invalid_argument", `cannot read ${file}: ${reason}`, { hint: "give the path of the script to run", cause: err });
  }
};
