// The unprivileged system users local mode runs its children as when flowsvc runs as root:
// embedded Postgres runs as `nobody`, local agents as `flowsvc-agent` (created on first need).
// One place for looking users up, creating one, and checking that a user can reach a path.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { chmod, cp, mkdir, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

export type SystemUser = { name: string; uid: number; gid: number };

/** The user's entry in /etc/passwd, or undefined when there is none. */
export const lookupUser = (name: string): SystemUser | undefined => {
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${name}:`));
  const [, , uid, gid] = line?.split(":") ?? [];
  if (uid === undefined || gid === undefined || !/^\d+$/.test(uid) || !/^\d+$/.test(gid)) return undefined;
  return { name, uid: Number(uid), gid: Number(gid) };
};

/** How a system user is created: shadow's useradd (Debian, Fedora...), then busybox's adduser (Alpine). */
const CREATORS: ReadonlyArray<{ cmd: string; args: (name: string, comment: string) => string[] }> = [
  {
    cmd: "useradd",
    args: (name, comment) => [
      "--system",
      "--user-group",
      "--no-create-home",
      "--home-dir",
      "/nonexistent",
      "--shell",
      "/usr/sbin/nologin",
      "--comment",
      comment,
      name,
    ],
  },
  { cmd: "adduser", args: (name, comment) => ["-S", "-D", "-H", "-h", "/nonexistent", "-s", "/sbin/nologin", "-g", comment, name] },
];

/**
 * The system user `name`, created (no login, no home, its own group) when it does not exist yet.
 * Only root can create it; `purpose` goes into the error when that fails.
 */
export const ensureSystemUser = (name: string, purpose: string): SystemUser => {
  const existing = lookupUser(name);
  if (existing) return existing;
  const tried: string[] = [];
  for (const { cmd, args } of CREATORS) {
    const r = spawnSync(cmd, args(name, `flowsvc ${purpose}`), {
      encoding: "utf8",
      timeout: 30_000,
      env: { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" },
    });
    // Another process may have created it meanwhile (useradd then exits 9): look again either way.
    const made = lookupUser(name);
    if (made) return made;
    tried.push(r.error ? `${cmd}: ${r.error.message}` : `${cmd}: ${(r.stderr || r.stdout || `exit ${r.status}`).trim()}`);
  }
  throw new Error(
    `flowsvc runs as root and runs ${purpose} as the unprivileged user "${name}", which does not exist and could not be created (${tried.join("; ")})`,
  );
};

/**
 * The first directory on the way to `path` (its ancestors, then `path` itself when it is a
 * directory) that `user` may not search, or undefined when every one lets it through. Mode bits
 * only (no ACLs), which is what a fresh checkout or data dir has.
 */
export const blockedDirFor = (path: string, user: SystemUser): string | undefined => {
  const dirs: string[] = [];
  for (let dir = path; ; dir = dirname(dir)) {
    dirs.unshift(dir);
    if (dir === dirname(dir)) break;
  }
  for (const dir of dirs) {
    let st;
    try {
      st = statSync(dir);
    } catch {
      return undefined; // not there yet: whoever makes it decides its mode
    }
    if (!st.isDirectory()) return undefined;
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) return dir;
  }
  return undefined;
};

/** Opens a copied tree for every user: directories 0755, files 0644, or 0755 when executable. */
const openTree = async (dir: string): Promise<void> => {
  await chmod(dir, 0o755);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) await openTree(p);
    else if (entry.isFile()) await chmod(p, (await stat(p)).mode & 0o100 ? 0o755 : 0o644);
  }
};

/**
 * When root runs a child as an unprivileged user that cannot read the files it needs (a checkout
 * or node_modules under a 0700 directory such as /root or a `mktemp -d`), the files are copied into
 * `dest`, readable by every user: each `from` to `dest/<to>`. `dest` names a version (the caller's
 * key of what it holds), so the copy is made once: a `.complete` marker says it finished, and a
 * half-made copy (a crash mid-way) is made again. `fixup` may edit the copy (in its scratch
 * directory, given as its argument) before it is made complete; `log` hears when a copy is made.
 */
export const copyReadableOnce = async (
  dest: string,
  entries: ReadonlyArray<{ from: string; to: string; filter?: (source: string) => boolean }>,
  opts: { log: (msg: string) => void; fixup?: (scratch: string) => Promise<void> },
): Promise<void> => {
  if (existsSync(join(dest, ".complete"))) return;
  opts.log(`copying ${entries.map((e) => e.from).join(", ")} to ${dest}`);
  await mkdir(dirname(dest), { recursive: true, mode: 0o755 });
  await chmod(dirname(dest), 0o755);
  const tmp = `${dest}.tmp-${randomBytes(4).toString("hex")}`;
  try {
    for (const e of entries) {
      await cp(e.from, join(tmp, e.to), { recursive: true, verbatimSymlinks: true, ...(e.filter ? { filter: e.filter } : {}) });
    }
    await opts.fixup?.(tmp);
    await openTree(tmp);
    await writeFile(join(tmp, ".complete"), "");
    await rm(dest, { recursive: true, force: true });
    await rename(tmp, dest);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
};
