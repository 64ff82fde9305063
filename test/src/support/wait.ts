import { statFields } from "./proc.js";

/** The one condition wait, from the store's test kit (polls every 100 ms, 30 s by default). */
export { waitFor } from "@flowsvc/store";

/** Live (not a zombie) per /proc: an orphan whose parent died may linger as a zombie until init reaps it. */
export const alive = (pid: number): boolean => {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== "Z" && state !== "X";
};
