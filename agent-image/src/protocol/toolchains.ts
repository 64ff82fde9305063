/**
 * Test support: finds the Go and Rust toolchains the Go and Rust SDK tests build with. `go` and
 * `cargo` are looked up on PATH, then where Debian's golang-go and rustup put them (cargo is often
 * in ~/.cargo/bin, which not every PATH has). A missing toolchain skips those tests with a message
 * that says how to install it; under CI (`CI` set, where .ci/run installs both) it fails instead.
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";

const FALLBACK_DIRS: Readonly<Record<string, readonly string[]>> = {
  go: ["/usr/lib/go/bin", "/usr/local/go/bin"],
  cargo: [join(homedir(), ".cargo", "bin"), "/usr/local/cargo/bin"],
};

const INSTALL: Readonly<Record<string, string>> = {
  go: "apt-get install golang-go",
  cargo: "apt-get install cargo",
};

/** The program's path, or undefined when it is nowhere to be found. */
export const findToolchain = (program: "go" | "cargo", path: string | undefined): string | undefined =>
  [...(path ?? "").split(delimiter).filter((d) => d !== ""), ...FALLBACK_DIRS[program]!]
    .map((dir) => join(dir, program))
    .find((file) => existsSync(file));

/**
 * The program's path; when it is missing, a `skip` reason for node:test (outside CI), or an error
 * (under CI, whose .ci/run installs it). `env` is the test's environment (PATH, CI).
 */
export const requireToolchain = (
  program: "go" | "cargo",
  env: Readonly<Record<string, string | undefined>>,
): { path: string; skip?: undefined } | { path?: undefined; skip: string } => {
  const path = findToolchain(program, env["PATH"]);
  if (path !== undefined) return { path };
  const why = `${program} is not installed (${INSTALL[program]!}; .ci/run installs it)`;
  if (env["CI"]) throw new Error(`${why}: the ${program} tests must run in CI`);
  return { skip: why };
};

/** Where the Go and Rust SDK tests keep what they build (gitignored), so a second run reuses it. */
export const buildCache = (repoRoot: string, name: string): string => join(repoRoot, ".cache", "sdk-build", name);
