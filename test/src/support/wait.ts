import { readFileSync } from "node:fs";

/** The one condition wait, from the store's test kit (polls every 100 ms, 30 s by default). */
export { waitFor } from "@flowsvc/store";

/** Live (not a zombie) per /proc: an orphan whose parent died may linger as a zombie until init reaps it. */
export const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
};
