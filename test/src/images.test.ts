/**
 * What can be checked of the images without building them (no container runtime here): the
 * Dockerfiles parse, are multi-stage from bases pinned to an exact version or digest, run as user
 * 10001 under tini, and their entrypoints are the operator contract's and exist in the build
 * output; the .dockerignore keeps installs and build output out of the context. And the agent image
 * needs only agent-image/ and core/: nothing of agent-image imports cli/ (or store, ingest,
 * controller), and the native client and its build bake in no path to the CLI.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";
import { REPO_ROOT } from "./support/server.js";

interface Instruction {
  keyword: string;
  /** The arguments as written, continuations joined. */
  args: string;
  line: number;
}

interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

const KEYWORDS = new Set([
  "FROM",
  "RUN",
  "CMD",
  "LABEL",
  "EXPOSE",
  "ENV",
  "ADD",
  "COPY",
  "ENTRYPOINT",
  "VOLUME",
  "USER",
  "WORKDIR",
  "ARG",
  "ONBUILD",
  "STOPSIGNAL",
  "HEALTHCHECK",
  "SHELL",
]);

/** Joins backslash continuations (comment lines inside a continuation are dropped, as Docker does). */
const logicalLines = (text: string): Array<{ text: string; line: number }> => {
  const out: Array<{ text: string; line: number }> = [];
  let current: { text: string; line: number } | undefined;
  text.split("\n").forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed.startsWith("#") || (trimmed === "" && !current)) return;
    const cont = trimmed.endsWith("\\");
    const part = (cont ? trimmed.slice(0, -1) : trimmed).trimEnd();
    current = current ? { ...current, text: `${current.text} ${part}` } : { text: part, line: i + 1 };
    if (!cont) {
      out.push(current);
      current = undefined;
    }
  });
  if (current) throw new Error(`line ${current.line}: a continuation runs off the end of the file`);
  return out;
};

const instruction = (l: string, line: number): Instruction => {
  const m = /^(\S+)\s+(.*)$/.exec(l);
  const keyword = m?.[1]?.toUpperCase() ?? "";
  if (!KEYWORDS.has(keyword)) throw new Error(`line ${line}: unknown or empty instruction: ${l.slice(0, 40)}`);
  return { keyword, args: m![2]!.trim(), line };
};

const stageOf = ({ args, line }: Instruction): Stage => {
  const f = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+([a-z][a-z0-9_.-]*))?$/i.exec(args);
  if (!f) throw new Error(`line ${line}: FROM ${args}`);
  return { from: f[1]!, name: f[2]?.toLowerCase(), instructions: [] };
};

/** A small Dockerfile parser: instructions grouped into stages; throws on what Docker would refuse. */
const parseDockerfile = (text: string): Stage[] => {
  const stages: Stage[] = [];
  for (const { text: l, line } of logicalLines(text)) {
    const { keyword, args } = instruction(l, line);
    if (keyword === "FROM") {
      stages.push(stageOf({ keyword, args, line }));
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) throw new Error(`line ${line}: ${keyword} before any FROM`);
    if (["ENTRYPOINT", "CMD"].includes(keyword) && args.startsWith("[")) JSON.parse(args); // exec form is JSON
    stage.instructions.push({ keyword, args, line });
  }
  if (stages.length === 0) throw new Error("no FROM");
  return stages;
};

/** An image reference pinned to an exact version tag (x.y.z...) or a digest; never latest or a moving major. */
const pinned = (ref: string): boolean =>
  /@sha256:[0-9a-f]{64}$/.test(ref) || /^[^@\s]+:(?!latest)[^:@/\s]*\d+\.\d+\.\d+[^:@/\s]*$/.test(ref);

const last = (stage: Stage, keyword: string): Instruction | undefined => stage.instructions.filter((i) => i.keyword === keyword).at(-1);

const IMAGES = [
  { dockerfile: "agent-image/Dockerfile", part: "agent-image", entry: "agent-image/dist/main.js" },
  { dockerfile: "controller/Dockerfile", part: "controller", entry: "controller/dist/main.js" },
  { dockerfile: "ingest/Dockerfile", part: "ingest", entry: "ingest/dist/main.js" },
] as const;

const parsed = (file: string): Stage[] => parseDockerfile(readFileSync(join(REPO_ROOT, file), "utf8"));

test("the parser reads instructions and stages and refuses what Docker would", () => {
  const stages = parseDockerfile('# c\nFROM a:1.2.3 AS build\nRUN x \\\n  # note\n  && y\nFROM b:2.0.1\nENTRYPOINT ["tini", "--"]\n');
  assert.deepEqual(
    stages.map((s) => [s.from, s.name, s.instructions.map((i) => [i.keyword, i.args])]),
    [
      ["a:1.2.3", "build", [["RUN", "x && y"]]],
      ["b:2.0.1", undefined, [["ENTRYPOINT", '["tini", "--"]']]],
    ],
  );
  for (const bad of ["RUN x\n", "FROM a:1.0.0\nFROBNICATE x\n", "FROM a:1.0.0 AS\n", 'FROM a:1.0.0\nENTRYPOINT ["tini",\n', "FROM\n"])
    assert.throws(() => parseDockerfile(bad), Error, JSON.stringify(bad));
  assert.deepEqual(
    ["node:20.20.2-bookworm-slim", `node@sha256:${"a".repeat(64)}`, "node:20-slim", "node:latest", "node", "node:lts"].map(pinned),
    [true, true, false, false, false, false],
  );
});

// How to bump the bases (README "Run it on Kubernetes"): change every `FROM node:<x.y.z>-bookworm[-slim]`
// of the three Dockerfiles together, to a Node release the root package.json's engines allow; to pin
// by digest, append `@sha256:<digest>` (`docker buildx imagetools inspect node:<x.y.z>-bookworm-slim`).
test("one Node base for every image and stage (a bump is one version everywhere), inside package.json's engines", () => {
  const bases = IMAGES.flatMap(({ dockerfile }) => parsed(dockerfile).map((s) => ({ dockerfile, from: s.from })));
  const versions = new Set(bases.map((b) => /^node:(\d+\.\d+\.\d+)-bookworm(-slim)?(@sha256:[0-9a-f]{64})?$/.exec(b.from)?.[1]));
  assert.equal(versions.size, 1, `bases: ${bases.map((b) => `${b.dockerfile}: ${b.from}`).join(", ")}`);
  const [version] = [...versions] as [string | undefined];
  assert.ok(version, "every base is node:<x.y.z>-bookworm[-slim], optionally @sha256:<digest>");
  const engines = (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { engines: { node: string } }).engines.node;
  const min = /^>=(\d+)\.(\d+)$/.exec(engines);
  assert.ok(min, `engines.node is >=x.y (${engines})`);
  const [major, minor] = version.split(".").map(Number) as [number, number];
  assert.ok(major > Number(min[1]) || (major === Number(min[1]) && minor >= Number(min[2])), `node ${version} satisfies ${engines}`);
});

for (const { dockerfile, part, entry } of IMAGES) {
  test(`${dockerfile}: multi-stage from pinned bases, user 10001, tini as pid 1 running ${entry}`, (t) => {
    const stages = parsed(dockerfile);
    assert.ok(stages.length >= 2, "multi-stage");
    const names = new Set(stages.map((s) => s.name).filter(Boolean));
    for (const s of stages) assert.ok(names.has(s.from) || pinned(s.from), `FROM ${s.from} is pinned to an exact version or digest`);
    const final = stages.at(-1)!;
    assert.equal(final.name, undefined, "the last stage is the image");
    assert.equal(last(final, "USER")?.args, "10001:10001");
    const entrypoint = JSON.parse(last(final, "ENTRYPOINT")?.args ?? "null") as string[];
    assert.deepEqual(entrypoint, ["tini", "--", "node", `/opt/flowsvc/${entry}`]);
    assert.equal(last(final, "CMD"), undefined, "no CMD: the Deployment or launcher gives no command either");
    assert.match(last(final, "RUN")?.args ?? "", /apt-get install .*\btini\b/);
    // The entry is copied from the build stage's output of that part.
    const copies = final.instructions.filter((i) => i.keyword === "COPY").map((i) => i.args);
    assert.ok(copies.includes(`--from=build /src/${part}/dist ./${part}/dist`), copies.join("\n"));
    for (const c of copies) {
      const from = /^--from=build \/src\/(\S+) \.\/(\S+)$/.exec(c);
      assert.ok(from, `COPY ${c}`);
      assert.equal(from[1], from[2], "laid out under /opt/flowsvc as in the repository");
      const src = from[1]!;
      if (/(^|\/)(dist|bin|bin-node|node_modules)$/.test(src)) continue; // build output, checked below
      assert.ok(existsSync(join(REPO_ROOT, src)), `${src} exists`);
    }
    // controller/dist/main.js and ingest/dist/main.js are the contract's bins (flowsvc-controller,
    // flowsvc-ingest), written with their composition roots.
    const source = join(REPO_ROOT, entry.replace(/^([^/]+)\/dist\/(.*)\.js$/, "$1/src/$2.ts"));
    if (!existsSync(source)) return t.skip(`${relative(REPO_ROOT, source)} is not written yet (the composition root of ${part})`);
    assert.ok(existsSync(join(REPO_ROOT, entry)), `${entry} is in the build output (npm run build)`);
  });
}

test("the agent image has bash, python3, node and the native flow client first on PATH", () => {
  const stages = parsed("agent-image/Dockerfile");
  const [build, final] = [stages[0]!, stages.at(-1)!];
  assert.match(final.from, /^node:/);
  assert.match(last(final, "RUN")!.args, /apt-get install .*\bbash\b.*\bpython3\b/);
  assert.match(
    build.instructions.map((i) => i.args).join("\n"),
    /node scripts\/build-native\.mjs && test -x agent-image\/bin\/flow-native/,
  );
  const env = final.instructions
    .filter((i) => i.keyword === "ENV")
    .map((i) => i.args)
    .join(" ");
  assert.match(env, /\bPATH=\/opt\/flowsvc\/agent-image\/bin:/);
  assert.match(env, /\bFLOW_CLIENT_DIR=\/opt\/flowsvc\/agent-image\/bin\b/);
  assert.match(env, /\bFLOW_AGENT_WORKDIR=\/scratch\b/);
  const copied = final.instructions.filter((i) => i.keyword === "COPY").map((i) => i.args.split(" ")[1]);
  assert.deepEqual(
    copied.filter((src) => !/^\/src\/(node_modules|core\/|agent-image\/)/.test(src!)),
    [],
    "only agent-image/, core/ and their dependencies",
  );
  assert.ok(existsSync(join(REPO_ROOT, "agent-image", "bin", "flow")), "the in-script client is built");
});

test(".dockerignore keeps installs, build output and tools out, and what the builds need in", () => {
  const patterns = readFileSync(join(REPO_ROOT, ".dockerignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  const toRegExp = (p: string): RegExp =>
    new RegExp(
      `^${p
        .replace(/[.+^${}()|[\]]/g, "\\$&")
        .replace(/\*\*\//g, "(.*/)?")
        .replace(/\*/g, "[^/]*")}(/.*)?$`,
    );
  const ignored = (path: string): boolean => patterns.some((p) => toRegExp(p).test(path));
  for (const path of [
    "node_modules/x",
    "agent-image/node_modules/y",
    "core/dist/index.js",
    "core/tsconfig.tsbuildinfo",
    ".git/HEAD",
    ".tools/helm",
    "agent-image/bin/flow",
  ])
    assert.ok(ignored(path), `${path} is ignored`);
  const workspaces = (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { workspaces: string[] }).workspaces;
  for (const path of [
    "package.json",
    "package-lock.json",
    "tsconfig.base.json",
    "scripts/build-native.mjs",
    "agent-image/native/flow.c",
    "store/migrations",
  ])
    assert.ok(!ignored(path), `${path} is in the context`);
  for (const w of workspaces)
    assert.ok(!ignored(`${w}/package.json`) && !ignored(`${w}/src/index.ts`), `${w} is in the context (npm ci needs every workspace)`);
});

/** Imports and path mentions in agent-image's sources that reach outside agent-image/ and core/. */
const upwardReferences = (file: string, text: string): string[] => {
  const found: string[] = [];
  const specifiers = text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\brequire\s*\(\s*)["']([^"']+)["']/g);
  for (const [, spec] of specifiers) {
    if (/^@flowsvc\/(?!core(\/|$)|agent(\/|$))/.test(spec!)) found.push(`${file}: imports ${spec}`);
    if (/^(\.\.\/){2,}(cli|store|ingest|controller|test|bench)\//.test(spec!)) found.push(`${file}: imports ${spec}`);
  }
  for (const m of text.matchAll(/["'`][^"'`\n]*\bcli\/(dist|src|bin)\/[^"'`\n]*["'`]/g)) found.push(`${file}: names ${m[0]}`);
  return found;
};

const sourceFiles = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "node_modules" || name === "dist" ? [] : sourceFiles(path);
    return /\.(ts|c|h|py)$/.test(name) ? [path] : [];
  });

test("agent-image depends on core only: no import of cli, store, ingest or controller, no path into cli/", () => {
  // The check itself finds what it must:
  assert.deepEqual(
    upwardReferences(
      "x.ts",
      'import { a } from "@flowsvc/cli";\nconst p = "../../../cli/dist/bin/flow.js";\nawait import("@flowsvc/store");',
    ),
    ["x.ts: imports @flowsvc/cli", "x.ts: imports @flowsvc/store", 'x.ts: names "../../../cli/dist/bin/flow.js"'],
  );
  assert.deepEqual(upwardReferences("y.ts", 'import { z } from "@flowsvc/core";\nimport { q } from "../client/io.js";'), []);

  const files = [...sourceFiles(join(REPO_ROOT, "agent-image")), join(REPO_ROOT, "scripts", "build-native.mjs")];
  assert.ok(files.length > 50, `${files.length} files`);
  const found = files.flatMap((f) => upwardReferences(relative(REPO_ROOT, f), readFileSync(f, "utf8")));
  assert.deepEqual(found, []);
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "agent-image", "package.json"), "utf8")) as { dependencies: Record<string, string> };
  assert.deepEqual(
    Object.keys(pkg.dependencies).filter((d) => d.startsWith("@flowsvc/")),
    ["@flowsvc/core"],
  );
  // The native client bakes nothing in: its strings name no build host path.
  const native = join(REPO_ROOT, "agent-image", "bin", "flow-native");
  if (existsSync(native)) assert.ok(!readFileSync(native).includes(REPO_ROOT), "flow-native holds no path of the checkout");
});
