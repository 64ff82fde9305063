import { readFileSync } from "node:fs";

/** Polls `check` every 100 ms until it holds; throws, naming `what`, after `timeoutMs`. */
export const waitFor = async (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

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
