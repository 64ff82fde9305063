import { readdirSync, readFileSync } from "node:fs";

/**
 * Whether a process group still has a LIVE member. `kill(-pgid, 0)` also counts zombies, and an
 * orphaned zombie stays until pid 1 reaps it: on hosts whose init reaps lazily (and in containers
 * whose pid 1 is not an init) that made every suspension wait a second or more for processes that
 * were already dead. On Linux, /proc tells live from zombie; elsewhere the kill probe answers.
 */
export const groupHasLiveMember = (pgid: number): boolean => {
  let pids: string[];
  try {
    pids = readdirSync("/proc");
  } catch {
    return probe(pgid);
  }
  for (const name of pids) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "latin1");
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so parse after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X") return true;
  }
  return false;
};

const probe = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
};
