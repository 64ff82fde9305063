import assert from "node:assert/strict";
import { test } from "node:test";
import { FlowError } from "@flowsvc/core";
import { loadServerConfig } from "./config.js";

const home = { HOME: "/home/someone" };

/** The message of the FlowError("config") that loading throws. */
const problem = (flags: Parameters<typeof loadServerConfig>[0], env: Record<string, string>): string => {
  try {
    loadServerConfig(flags, { ...home, ...env });
  } catch (err) {
    assert.ok(err instanceof FlowError, String(err));
    assert.equal(err.code, "config");
    return err.message;
  }
  assert.fail("the configuration loaded");
};

void test("defaults, then the environment, then flags", () => {
  const d = loadServerConfig({}, home);
  assert.deepEqual([d.port, d.agents, d.leaseMs, d.agentMaxJobs, d.agentIdleMs, d.logLevel], [8080, 4, 15_000, 1000, 60_000, "info"]);
  const e = loadServerConfig(
    {},
    { ...home, FLOWSVC_PORT: "9000", FLOWSVC_AGENTS: "2", FLOWSVC_AGENT_MAX_JOBS: "50", FLOWSVC_AGENT_IDLE_MS: "1500" },
  );
  assert.deepEqual([e.port, e.agents, e.agentMaxJobs, e.agentIdleMs], [9000, 2, 50, 1500]);
  const f = loadServerConfig({ port: "9100", agents: "3" }, { ...home, FLOWSVC_PORT: "9000", FLOWSVC_AGENTS: "2" });
  assert.deepEqual([f.port, f.agents], [9100, 3]);
  const pools = loadServerConfig({ agentPool: ["gpu,polyglot:2"] }, home).agentPools;
  assert.deepEqual(pools, [{ capabilities: ["gpu", "polyglot"], count: 2 }]);
});

void test("every bad value is reported at once, each under its flag and variable", () => {
  const message = problem({ port: "70000", agentPool: ["gpu"] }, { FLOWSVC_AGENT_MAX_JOBS: "0", FLOWSVC_AGENT_IDLE_MS: "fast" });
  assert.match(message, /^invalid server configuration:/);
  assert.match(message, /--port \/ FLOWSVC_PORT must be a port number/);
  assert.match(message, /--agent-pool \/ FLOWSVC_AGENT_POOLS "gpu" takes <capability>\[,<capability>\.\.\.\]:<count>, e\.g\. polyglot:2/);
  assert.match(message, /FLOWSVC_AGENT_MAX_JOBS must be a whole number from 1 to 1000000/);
  assert.match(message, /FLOWSVC_AGENT_IDLE_MS must be a whole number of milliseconds from 100 to 86400000/);
  assert.match(problem({}, { FLOWSVC_AGENT_IDLE_MS: "99" }), /FLOWSVC_AGENT_IDLE_MS must be/);
  assert.match(problem({}, { FLOWSVC_AGENT_MAX_JOBS: "2.5" }), /FLOWSVC_AGENT_MAX_JOBS must be/);
  assert.match(
    problem({ logLevel: "verbose" }, {}),
    /--log-level \/ FLOWSVC_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace/,
  );
  assert.match(problem({}, { FLOWSVC_HOST: "" }), /--host \/ FLOWSVC_HOST is empty/);
  assert.doesNotMatch(message, /agentPools|agentMaxJobs|agentIdleMs/);
});

void test("the number settings take decimal digits only: no hex, exponent, sign, blanks, NUL or 1e400", () => {
  const c = loadServerConfig({ agents: "16", leaseMs: "4096" }, { ...home, FLOWSVC_AGENT_MAX_JOBS: "0050", FLOWSVC_AGENT_IDLE_MS: "1000" });
  assert.deepEqual([c.agents, c.leaseMs, c.agentMaxJobs, c.agentIdleMs], [16, 4096, 50, 1000]);
  const settings = [
    ["--agents / FLOWSVC_AGENTS", (v: string) => problem({ agents: v }, {})],
    ["--agents / FLOWSVC_AGENTS", (v: string) => problem({}, { FLOWSVC_AGENTS: v })],
    ["--lease-ms / FLOWSVC_AGENT_LEASE_MS", (v: string) => problem({ leaseMs: v }, {})],
    ["FLOWSVC_AGENT_MAX_JOBS", (v: string) => problem({}, { FLOWSVC_AGENT_MAX_JOBS: v })],
    ["FLOWSVC_AGENT_IDLE_MS", (v: string) => problem({}, { FLOWSVC_AGENT_IDLE_MS: v })],
  ] as const;
  for (const [name, refuse] of settings)
    for (const bad of ["0x1000", "1e3", " 1000 ", "1000\n", "+1000", "-1", "1000.0", "1e400", "1000\u0000", "\ud800", "١٠٠٠"])
      assert.ok(refuse(bad).includes(`${name} must be a whole number`), `${name} took ${JSON.stringify(bad)}`);
});

void test("FLOWSVC_DATABASE_URL is a postgres:// URL and FLOWSVC_PUBLIC_URL an http(s) one", () => {
  const key = Buffer.alloc(32, 7).toString("base64");
  const c = loadServerConfig(
    {},
    { ...home, FLOWSVC_DATABASE_URL: "postgresql://u@db:5432/f", FLOWSVC_MASTER_KEY: key, FLOWSVC_PUBLIC_URL: "https://flow.example.com" },
  );
  assert.deepEqual([c.databaseUrl, c.publicUrl], ["postgresql://u@db:5432/f", "https://flow.example.com"]);
  for (const bad of ["http://db:5432/f", "mysql://db/f", "notaurl"])
    assert.match(
      problem({}, { FLOWSVC_DATABASE_URL: bad, FLOWSVC_MASTER_KEY: key }),
      /FLOWSVC_DATABASE_URL must be a postgres:\/\/ URL/,
      bad,
    );
  for (const bad of ["javascript:alert(1)", "file:///etc/passwd", "ftp://x", "nope"])
    assert.match(problem({}, { FLOWSVC_PUBLIC_URL: bad }), /FLOWSVC_PUBLIC_URL must be an http\(s\) URL/, bad);
});

void test("an empty data dir is refused, not taken as the current directory", () => {
  assert.equal(loadServerConfig({}, { ...home, FLOWSVC_DATA_DIR: "/srv/flow" }).dataDir, "/srv/flow");
  assert.equal(loadServerConfig({ dataDir: "rel" }, home).dataDir, `${process.cwd()}/rel`);
  for (const [flags, env] of [
    [{}, { FLOWSVC_DATA_DIR: "" }],
    [{ dataDir: "" }, {}],
    [{ dataDir: "" }, { FLOWSVC_DATA_DIR: "/srv/flow" }],
  ] as const)
    assert.match(problem(flags, env), /--data-dir \/ FLOWSVC_DATA_DIR is empty/, JSON.stringify([flags, env]));
});

void test("FLOWSVC_AGENT_SPAWNER: on by default, off turns the local agents' script spawner off; another value is refused", () => {
  assert.equal(loadServerConfig({}, home).agentSpawner, "on");
  assert.equal(loadServerConfig({}, { ...home, FLOWSVC_AGENT_SPAWNER: "off" }).agentSpawner, "off");
  for (const bad of ["no", "Off", "off\u0000", "LD_PRELOAD=x"])
    assert.match(problem({}, { FLOWSVC_AGENT_SPAWNER: bad }), /FLOWSVC_AGENT_SPAWNER must be "on" \(the default\) or "off"/, bad);
});

void test("an external database without its master key is refused with how to make one", () => {
  const message = problem({}, { FLOWSVC_DATABASE_URL: "postgres://u:p@db.example:5432/flowsvc" });
  assert.match(message, /FLOWSVC_DATABASE_URL is set but FLOWSVC_MASTER_KEY is not/);
});

void test("FLOWSVC_CONNECTOR_BASE_URLS points connector providers at another base URL; a bad one refuses the start", () => {
  assert.deepEqual(loadServerConfig({}, home).connectorBaseUrls, {});
  const c = loadServerConfig({}, { ...home, FLOWSVC_CONNECTOR_BASE_URLS: '{"anthropic":"http://127.0.0.1:8123/"}' });
  assert.deepEqual(c.connectorBaseUrls, { anthropic: "http://127.0.0.1:8123" });
  assert.match(problem({}, { FLOWSVC_CONNECTOR_BASE_URLS: '{"anthropic":"http://model.example"}' }), /anthropic: must be https/);
  assert.match(problem({}, { FLOWSVC_CONNECTOR_BASE_URLS: "[1]" }), /must be a JSON object/);
});

void test("connected-account providers: a missing capabilities object refuses the start naming the provider and the field", () => {
  const provider = {
    name: "github",
    authorize_url: "https://github.com/login/oauth/authorize",
    token_url: "https://github.com/login/oauth/access_token",
    client_id: "Iv1.x",
    client_secret: "y",
    scopes: [],
    identity: { url: "https://api.github.com/user", id_pointer: "/id", label_pointer: "/login" },
  };
  const msg = problem({}, { FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS: JSON.stringify([provider]), FLOWSVC_PORT: "x" });
  assert.match(msg, /FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS\[0\] \(provider github\)\.capabilities: is required/);
  assert.match(msg, /--port \/ FLOWSVC_PORT must be a port number/);
  const ok = loadServerConfig(
    {},
    {
      ...home,
      FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS: JSON.stringify([
        { ...provider, capabilities: { rotates_refresh_token: false, reuse_revokes_family: false } },
      ]),
      FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI: "http://127.0.0.1:8080/oauth/callback",
    },
  );
  assert.equal(ok.accounts.providers.get("github")?.capabilities.rotates_refresh_token, false);
});

void test("http node egress: local mode allows private addresses by default; the two settings are read and a bad one refuses the start", () => {
  const d = loadServerConfig({}, home).httpEgress;
  assert.deepEqual([d.allowPrivate, d.allowCidrs], [true, []]);
  const s = loadServerConfig({}, { ...home, FLOWSVC_HTTP_ALLOW_PRIVATE: "false", FLOWSVC_HTTP_ALLOW_CIDRS: "10.1.0.0/16" }).httpEgress;
  assert.deepEqual([s.allowPrivate, s.allowCidrs], [false, ["10.1.0.0/16"]]);
  const message = problem({ port: "70000" }, { FLOWSVC_HTTP_ALLOW_CIDRS: "10.1.0.0/99", FLOWSVC_HTTP_ALLOW_PRIVATE: "1" });
  assert.match(message, /--port \/ FLOWSVC_PORT must be a port number/);
  assert.match(message, /FLOWSVC_HTTP_ALLOW_CIDRS: "10\.1\.0\.0\/99" is not a CIDR: the prefix length must be a whole number from 0 to 32/);
  assert.match(message, /FLOWSVC_HTTP_ALLOW_PRIVATE: must be true or false, not "1"/);
});
