import assert from "node:assert/strict";
import { mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { FlowError } from "@flowsvc/core";
import { readCliConfig, resolveCliConfigPath, writeCliConfig } from "./cli-config.js";

void test("the config path is FLOWSVC_CONFIG, else under XDG_CONFIG_HOME, else under ~/.config", () => {
  assert.equal(resolveCliConfigPath({ FLOWSVC_CONFIG: "/c.json", XDG_CONFIG_HOME: "/x", HOME: "/h" }), "/c.json");
  assert.equal(resolveCliConfigPath({ XDG_CONFIG_HOME: "/x", HOME: "/h" }), "/x/flowsvc/config.json");
  assert.equal(resolveCliConfigPath({ HOME: "/h" }), "/h/.config/flowsvc/config.json");
});

void test("a written config reads back, lives in a created directory, is 0600, and leaves no temp file", async () => {
  const dir = await mkdtemp(join(tmpdir(), "cli-config-"));
  const path = join(dir, "deep", "flowsvc", "config.json");
  const cfg = { url: "http://127.0.0.1:8080", token: "tok", project: "default/default" };
  await writeCliConfig(path, cfg);
  await writeCliConfig(path, { ...cfg, token: "tok2" });
  assert.deepEqual(await readCliConfig(path), { ...cfg, token: "tok2" });
  assert.equal((await stat(path)).mode & 0o777, 0o600);
  assert.deepEqual(await readdir(join(dir, "deep", "flowsvc")), ["config.json"]);
  await rm(dir, { recursive: true, force: true });
});

void test("no file reads as undefined; a broken file is a config error that names the path", async () => {
  const dir = await mkdtemp(join(tmpdir(), "cli-config-"));
  assert.equal(await readCliConfig(join(dir, "none.json")), undefined);
  const bad = join(dir, "bad.json");
  await writeFile(bad, JSON.stringify({ url: "http://x", token: "t", project: "noslash" }));
  await assert.rejects(
    readCliConfig(bad),
    (e: unknown) => e instanceof FlowError && e.code === "config" && e.message.includes(bad) && /project/.test(e.message),
  );
  await rm(dir, { recursive: true, force: true });
});
