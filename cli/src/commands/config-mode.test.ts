/**
 * A saved CLI config that holds a token and that group or others may access: every command that uses
 * its token prints one warning line on stderr and goes on (as kubectl warns of a group- or
 * world-readable kubeconfig); `flow login` rewrites it 0600, through a symlink too. In process
 * (runCli) against the stand-in API on 127.0.0.1.
 */
import assert from "node:assert/strict";
import { chmod, lstat, mkdtemp, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { startFakeFlowsvc } from "../bin/fake-flowsvc.js";
import type { FakeFlowsvc } from "../bin/fake-flowsvc.js";
import { looseModeWarning } from "../cli-config.js";
import { captureStdio } from "../testing/capture-stdio.js";
import { runCli } from "./program.js";

const SCOPED = "/api/v1/orgs/a/projects/b";
const FILE_TOKEN = "flw_from-the-file";

let api: FakeFlowsvc;
let dir: string;
before(async () => {
  api = await startFakeFlowsvc();
  api.routes.set(`GET ${SCOPED}/runs`, () => ({ status: 200, json: { runs: [] } }));
  api.routes.set("GET /api/v1/whoami", () => ({
    status: 200,
    json: { user: "ann", projects: [{ org: "a", project: "b", role: "admin" }] },
  }));
  dir = await mkdtemp(join(tmpdir(), "cli-config-mode-"));
});
after(async () => {
  await api.stop();
  await rm(dir, { recursive: true, force: true });
});

let files = 0;
/** A config file holding `token`, with exactly `mode`. */
const configFile = async (mode: number, token = FILE_TOKEN): Promise<string> => {
  const path = join(dir, `config-${files++}.json`);
  await writeFile(path, JSON.stringify({ url: api.url, token, project: "a/b" }));
  await chmod(path, mode);
  return path;
};

const flow = async (args: string[], env: Record<string, string>): Promise<{ code: number; out: string; err: string[] }> => {
  const { io, out, err } = captureStdio();
  const code = await runCli(["node", "flow", ...args], { env: { HOME: dir, ...env }, io, now: () => new Date() });
  return { code, out: out.join("\n"), err };
};

/** `flow runs ls -o json` with the config at `path`: it must still reach the API with the file's token. */
const runsLs = async (path: string, env: Record<string, string> = {}): Promise<string[]> => {
  const before = api.seen.length;
  const r = await flow(["runs", "ls", "-o", "json"], { FLOWSVC_CONFIG: path, ...env });
  assert.equal(r.code, 0, r.err.join("\n"));
  assert.deepEqual(JSON.parse(r.out), []);
  assert.equal(api.seen.length, before + 1);
  assert.equal(api.seen.at(-1)?.authorization, `Bearer ${env.FLOWSVC_TOKEN ?? FILE_TOKEN}`);
  return r.err;
};

void test("a 0600 config is used silently; 0640, 0604 and 0666 get one warning line each, and the command still works", async () => {
  assert.deepEqual(await runsLs(await configFile(0o600)), []);
  for (const [mode, who] of [
    [0o640, "group-readable (mode 0640)"],
    [0o604, "world-readable (mode 0604)"],
    [0o666, "group- and world-readable (mode 0666)"],
  ] as const) {
    const path = await configFile(mode);
    assert.deepEqual(await runsLs(path), [`warning: ${path} is ${who} and holds an API token; chmod 600 ${path}`]);
  }
});

void test("a config path with a terminal escape and a line break is warned of on one line, escaped", async () => {
  const path = join(dir, "evil\x1b[2J\nconfig.json");
  await writeFile(path, JSON.stringify({ url: api.url, token: FILE_TOKEN, project: "a/b" }));
  await chmod(path, 0o644);
  const [line, ...more] = await runsLs(path);
  assert.deepEqual(more, []);
  assert.ok(line?.startsWith(`warning: ${dir}/evil\\x1b[2J\\x0aconfig.json is group- and world-readable (mode 0644)`), line);
  assert.ok(line !== undefined && !line.includes("\x1b") && !line.includes("\n"), line);
});

void test("no warning when the token comes from FLOWSVC_TOKEN or --token, or when the file holds none", async () => {
  const wide = await configFile(0o644);
  assert.deepEqual(await runsLs(wide, { FLOWSVC_TOKEN: "flw_from-the-env" }), []);
  const flag = await flow(["runs", "ls", "--token", "flw_flag"], { FLOWSVC_CONFIG: wide });
  assert.deepEqual([flag.code, flag.err], [0, ["no runs"]]);
  const tokenless = await configFile(0o666, "");
  const r = await flow(["runs", "ls"], { FLOWSVC_CONFIG: tokenless });
  assert.deepEqual([r.code, r.err], [0, ["no runs"]]);
});

void test("a symlinked config: the mode is the target's; flow login rewrites the target 0600 and keeps the link", async () => {
  const target = await configFile(0o640);
  const link = join(dir, "linked.json");
  await symlink(target, link);
  assert.deepEqual(await runsLs(link), [`warning: ${link} is group-readable (mode 0640) and holds an API token; chmod 600 ${link}`]);

  const login = await flow(["login", "--token", "flw_new"], { FLOWSVC_CONFIG: link });
  assert.equal(login.code, 0, login.err.join("\n"));
  assert.ok((await lstat(link)).isSymbolicLink());
  assert.equal((await stat(target)).mode & 0o777, 0o600);
  assert.deepEqual(await runsLs(link, { FLOWSVC_TOKEN: "flw_new" }), []);
  const fromFile = await flow(["runs", "ls"], { FLOWSVC_CONFIG: link });
  assert.deepEqual([fromFile.code, fromFile.err, api.seen.at(-1)?.authorization], [0, ["no runs"], "Bearer flw_new"]);
});

void test("flow login tightens a wider config it rewrites, and creates its directories 0700", async () => {
  const wide = await configFile(0o666);
  const r = await flow(["login", "--token", "flw_new"], { FLOWSVC_CONFIG: wide });
  assert.equal(r.code, 0, r.err.join("\n"));
  assert.equal((await stat(wide)).mode & 0o777, 0o600);

  const fresh = await flow(["login", "--url", api.url, "--token", "flw_new"], { XDG_CONFIG_HOME: join(dir, "xdg") });
  assert.equal(fresh.code, 0, fresh.err.join("\n"));
  assert.equal((await stat(join(dir, "xdg"))).mode & 0o777, 0o700);
  assert.equal((await stat(join(dir, "xdg", "flowsvc"))).mode & 0o777, 0o700);
  assert.equal((await stat(join(dir, "xdg", "flowsvc", "config.json"))).mode & 0o777, 0o600);
});

void test("the warning quotes a path a shell would split, and names write-only access as such", () => {
  assert.equal(
    looseModeWarning("/tmp/my config.json", 0o100620),
    "warning: /tmp/my config.json is group-writable (mode 0620) and holds an API token; chmod 600 '/tmp/my config.json'",
  );
  assert.equal(looseModeWarning("/c.json", 0o100600), undefined);
  assert.equal(looseModeWarning("/c.json", 0o100400), undefined);
});
