import assert from "node:assert/strict";
import { test } from "node:test";
import { FlowError } from "@flowsvc/core";
import { DEFAULT_PROJECT, DEFAULT_URL, parseCliEnv, resolveSettings } from "./config.js";

const saved = { url: "http://file:1", token: "file-token", project: "fileorg/fileproj" };
const env = { FLOWSVC_URL: "http://env:1", FLOWSVC_TOKEN: "env-token", FLOWSVC_PROJECT: "envorg/envproj" };
const flags = { url: "http://flag:1", token: "flag-token", project: "flagorg/flagproj" };

void test("flags win over the environment, which wins over the saved config, which wins over the defaults", () => {
  const all = resolveSettings(flags, env, saved);
  assert.deepEqual([all.url, all.token, all.org, all.project], ["http://flag:1", "flag-token", "flagorg", "flagproj"]);
  const envOnly = resolveSettings({}, env, saved);
  assert.deepEqual([envOnly.url, envOnly.token, envOnly.org, envOnly.project], ["http://env:1", "env-token", "envorg", "envproj"]);
  const fileOnly = resolveSettings({}, {}, saved);
  assert.deepEqual([fileOnly.url, fileOnly.token, fileOnly.org, fileOnly.project], ["http://file:1", "file-token", "fileorg", "fileproj"]);
  const none = resolveSettings({}, {}, undefined);
  assert.deepEqual([none.url, none.token, `${none.org}/${none.project}`], [DEFAULT_URL, "", DEFAULT_PROJECT]);
  assert.deepEqual(none.sources, { url: "default", token: "default", project: "default" });
});

void test("each setting is resolved on its own: a flag for one does not hide the file's others", () => {
  const s = resolveSettings({ project: "a/b" }, { FLOWSVC_TOKEN: "env-token" }, saved);
  assert.deepEqual([s.url, s.token, s.org, s.project], ["http://file:1", "env-token", "a", "b"]);
  assert.deepEqual(s.sources, { url: "file", token: "env", project: "flag" });
});

void test("a trailing slash on the URL is dropped", () => {
  assert.equal(resolveSettings({ url: "http://x:1/" }, {}, undefined).url, "http://x:1");
});

void test("blank variables count as unset", async () => {
  const parsed = await parseCliEnv({ FLOWSVC_URL: "", FLOWSVC_TOKEN: "  ", FLOWSVC_PROJECT: "a/b", UNRELATED: "x" });
  assert.deepEqual([parsed.FLOWSVC_URL, parsed.FLOWSVC_TOKEN, parsed.FLOWSVC_PROJECT], [undefined, undefined, "a/b"]);
});

void test("a bad FLOWSVC_URL or FLOWSVC_PROJECT is a config error naming the variable", async () => {
  await assert.rejects(
    parseCliEnv({ FLOWSVC_URL: "not a url" }),
    (e: unknown) => e instanceof FlowError && e.code === "config" && /FLOWSVC_URL/.test(e.message),
  );
  await assert.rejects(
    parseCliEnv({ FLOWSVC_PROJECT: "noslash" }),
    (e: unknown) => e instanceof FlowError && /FLOWSVC_PROJECT: must be org\/project/.test(e.message),
  );
});
