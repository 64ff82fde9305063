// Processes as Linux's /proc shows them, for the tests that look at what the server started.
import { existsSync, readdirSync, readFileSync } from "node:fs";

/**
 * The fields of /proc/<pid>/stat from the state on (field 3): [0] state, [1] ppid, [2] pgrp, ...
 * The command name may hold spaces and parentheses, so the fields are read after its last ')'.
 * Undefined when the process is gone.
 */
export const statFields = (pid: number): string[] | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
};

/** Every process whose parent is `parent` (a scan of /proc). */
const scanChildrenOf = (parent: number): number[] =>
  readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => Number(statFields(pid)?.[1]) === parent);

/**
 * The processes `parent` started: its main thread's children from /proc (cheap enough to poll), or,
 * on a kernel without CONFIG_PROC_CHILDREN, every process whose parent it is (a scan of /proc).
 */
export const childrenOf = (parent: number): number[] => {
  try {
    return readFileSync(`/proc/${parent}/task/${parent}/children`, "latin1").split(" ").filter(Boolean).map(Number);
  } catch {
    return existsSync(`/proc/${parent}`) ? scanChildrenOf(parent) : [];
  }
};
