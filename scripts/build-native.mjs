#!/usr/bin/env node
// Builds the in-script `flow` client that the agent puts first on a script's PATH
// (docs/internals.md, "In-script socket protocol"; shared/ARCHITECTURE.md, "Decisions").
//
//   agent-image/bin/flow-native  agent-image/native/flow.c compiled with `musl-gcc -static` when
//                                musl is there and $CC is not set, else with `cc` (or $CC), when
//                                a compiler is found; no path is baked in (it finds the user CLI
//                                on PATH or in $FLOW_USER_CLI at run time)
//   agent-image/bin/flow         flow-native when it was built, else a shim that execs the Node
//                                fallback; FLOW_CLIENT=node at build time forces the shim
//   agent-image/bin-node/flow    always the shim, so tests can point FLOW_CLIENT_DIR at either
//   agent-image/libexec/flow-spawner  agent-image/native/spawner.c, when a compiler is found: a
//                                worker agent's scripts start from it, not from a fork of the
//                                agent (agent-image/src/script-spawner.ts); none: Node's spawn
//
// The shim names the Node fallback relative to its own location, so agent-image/ can be copied
// or moved (the agent image, the local server's agent-runtime copy) and still work; its Node is
// the one that built it when that still exists, else `node` on PATH. Nothing here points at cli/:
// the agent runs with only agent-image/ and core/ (test/src/images.test.ts checks the imports).
//
// Runs in `npm run build` after `tsc -b`. A host without a compiler gets a one-line notice and
// the Node fallback; a flow.c that does not compile fails the build.
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(root, "agent-image", "native", "flow.c");
const binDir = join(root, "agent-image", "bin");
const nodeBinDir = join(root, "agent-image", "bin-node");
const nativeOut = join(binDir, "flow-native");
const spawnerSource = join(root, "agent-image", "native", "spawner.c");
const spawnerOut = join(root, "agent-image", "libexec", "flow-spawner");

// `CC` may carry words (`ccache gcc`, `gcc -m64`), as make and node-gyp allow.
const ccWords = (process.env.CC ?? "").trim().split(/\s+/).filter(Boolean);
const [cc, ...ccArgs] = ccWords.length ? ccWords : ["cc"];

const shellQuote = (s) => `'${s.replaceAll("'", `'\\''`)}'`;

/** Writes a file next to its final place, then renames it: a running binary is never rewritten. */
const install = (dest, write) => {
  mkdirSync(dirname(dest), { recursive: true });
  const tmp = `${dest}.tmp-${process.pid}`;
  try {
    write(tmp);
    chmodSync(tmp, 0o755);
    renameSync(tmp, dest);
  } finally {
    rmSync(tmp, { force: true });
  }
};

const compile = (args, [command, ...words] = [cc, ...ccArgs]) => spawnSync(command, [...words, ...args], { encoding: "utf8" });

/**
 * The client is built with musl (`musl-gcc`, Debian's musl-tools) when it is there and CC was not
 * chosen: glibc's start-up runs ~30-40 CPUID instructions (cache and CPU feature probing), each a
 * VM exit on a virtual machine (~6 us here), on every exec, static or not; musl's does none.
 * Measured on this 2-vCPU VM, 1000 calls from bash, one after another: `flow --version` 0.71 ms
 * static glibc, 0.42 ms static musl. A script pays it on every `flow` call, replays included.
 */
const muslWorks = () => {
  if (ccWords.length) return false;
  const dir = mkdtempSync(join(tmpdir(), "flow-musl-"));
  try {
    writeFileSync(join(dir, "probe.c"), '#include <stdio.h>\n#include <sys/socket.h>\nint main(void) { return puts("") < 0; }\n');
    const r = compile(["-static", "-o", join(dir, "probe"), join(dir, "probe.c")], ["musl-gcc"]);
    return r.error === undefined && r.status === 0 && spawnSync(join(dir, "probe")).status === 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

/** A compiler that can build a hello world: missing one, or one without libc headers, is no compiler. */
const compilerWorks = () => {
  const dir = mkdtempSync(join(tmpdir(), "flow-cc-"));
  try {
    writeFileSync(join(dir, "probe.c"), '#include <stdio.h>\n#include <sys/socket.h>\nint main(void) { return puts("") < 0; }\n');
    const r = compile(["-o", join(dir, "probe"), join(dir, "probe.c")]);
    return r.error === undefined && r.status === 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

const buildNative = () => {
  if (!compilerWorks()) {
    rmSync(nativeOut, { force: true }); // never leave a stale binary from an earlier build
    rmSync(spawnerOut, { force: true });
    console.error(`build-native: no working C compiler (${cc}); agent-image/bin/flow is the Node fallback`);
    return false;
  }
  const flags = ["-std=c11", "-O2", "-Wall", "-Wextra", "-s"];
  // Static when the host has libc.a: no dynamic loader to run on every call. Measured: a
  // replayed step takes 1.72 ms median static, 1.94 ms dynamic, /bin/true 1.59 ms (1000 calls
  // each, round-robin, spawnSync from Node). Dynamic otherwise.
  const musl = muslWorks();
  install(nativeOut, (tmp) => {
    let r = musl ? compile([...flags, "-static", "-o", tmp, source], ["musl-gcc"]) : { status: 1 };
    if (r.status !== 0) r = compile([...flags, "-static", "-o", tmp, source]);
    if (r.status !== 0) r = compile([...flags, "-o", tmp, source]);
    process.stderr.write(r.stderr ?? "");
    if (r.status !== 0) throw new Error(`build-native: ${cc} failed to compile ${source}`);
  });
  // Dynamic: it is started once per worker agent, not per call.
  install(spawnerOut, (tmp) => {
    const r = compile(["-std=c11", "-O2", "-Wall", "-Wextra", "-s", "-o", tmp, spawnerSource]);
    process.stderr.write(r.stderr ?? "");
    if (r.status !== 0) throw new Error(`build-native: ${cc} failed to compile ${spawnerSource}`);
  });
  return true;
};

// <agent-image>/bin*/flow -> <agent-image>/dist/bin/flow-inscript.js; $0 is the path the shell
// found the shim by, resolved only when it is a link (readlink costs a process).
const nodeShim = [
  "#!/bin/sh",
  "# The in-script flow client, Node fallback (written by scripts/build-native.mjs).",
  `node=${shellQuote(process.execPath)}`,
  '[ -x "$node" ] || node=node',
  'self=$0; [ -L "$self" ] && self=$(readlink -f "$self")',
  'exec "$node" "${self%/*}/../dist/bin/flow-inscript.js" "$@"',
  "",
].join("\n");

let native;
try {
  native = buildNative();
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
const forceNode = process.env.FLOW_CLIENT === "node";
install(join(nodeBinDir, "flow"), (tmp) => writeFileSync(tmp, nodeShim));
if (native && !forceNode) install(join(binDir, "flow"), (tmp) => copyFileSync(nativeOut, tmp));
else install(join(binDir, "flow"), (tmp) => writeFileSync(tmp, nodeShim));
if (native && forceNode) console.error("build-native: FLOW_CLIENT=node: agent-image/bin/flow is the Node fallback");
