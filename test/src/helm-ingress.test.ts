/**
 * The chart's Ingress publishes ingest's public surface and nothing else: its paths (rendered by the
 * real helm) held against every route the real ingest app registers. Each public route is matched
 * under the Ingress's Prefix/Exact rules; no agent API route (/agent/v1, for agent Pods inside the
 * cluster) and no probe is matched, neither by the rules nor by a controller that matches a Prefix
 * as a plain string. Hostile spellings of an agent path through a public prefix reach no agent route
 * on the listening app, and an operator's extraPaths cannot publish one.
 */
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { parseAllDocuments } from "yaml";
import { createTestApp, registeredRoutes, type TestApp } from "@flowsvc/ingest/testing";
import { rawRequest } from "./support/raw-http.js";
import { REPO_ROOT } from "./support/server.js";

interface IngressPath {
  path: string;
  pathType: "Prefix" | "Exact";
}

const CHART = join(REPO_ROOT, "helm", "flowsvc");
const BASE = ["--set", "demo.insecureMasterKey=true", "--set", "postgres.demo.enabled=true", "--set", "ingest.ingress.enabled=true"];
/** Not public: the agent API, the probes, and /metrics (its own port in the chart; the test app also serves it on http). */
const PRIVATE = /^\/(agent\/v1\/|healthz$|readyz$|metrics$)/;

let helmBin: string;
let t: TestApp;
let base: string;
let dir: string;

const helm = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile(
      helmBin,
      ["template", "r", CHART, "--namespace", "flowsvc", "--show-only", "templates/ingest-ingress.yaml", ...BASE, ...args],
      (err, stdout, stderr) => resolve({ code: err ? 1 : 0, stdout, stderr }),
    );
  });

const ingressPaths = async (args: string[] = []): Promise<IngressPath[]> => {
  const r = await helm(args);
  assert.equal(r.code, 0, r.stderr);
  const [ingress] = parseAllDocuments(r.stdout).map(
    (d) => d.toJS() as { spec: { rules: Array<{ http: { paths: Array<IngressPath & { backend: unknown }> } }> } },
  );
  const paths = ingress!.spec.rules.flatMap((rule) => rule.http.paths);
  for (const p of paths) assert.deepEqual(p.backend, { service: { name: "r-flowsvc-ingest", port: { name: "http" } } }, p.path);
  return paths.map(({ path, pathType }) => ({ path, pathType }));
};

/** The Ingress rules (networking.k8s.io/v1): Exact is the whole path; Prefix matches whole `/` elements. */
const matches = (p: IngressPath, url: string): boolean => {
  if (p.pathType === "Exact") return url === p.path;
  const prefix = p.path.replace(/\/+$/, "");
  return prefix === "" || url === prefix || url.startsWith(`${prefix}/`);
};
/** What a lax controller does with a Prefix (a plain string prefix, as Traefik's PathPrefix). */
const laxMatches = (p: IngressPath, url: string): boolean => (p.pathType === "Exact" ? url === p.path : url.startsWith(p.path));

/** A route's URL with a value in each parameter (`/p/:org/:project/runs` -> `/p/x/x/runs`). */
const concrete = (url: string): string => url.replace(/:[A-Za-z0-9_]+/g, "x");

before(async () => {
  helmBin = join(REPO_ROOT, ".tools", "helm");
  if (!existsSync(helmBin)) execFileSync(process.execPath, [join(REPO_ROOT, "scripts", "fetch-helm.mjs")], { stdio: "inherit" });
  dir = mkdtempSync(join(tmpdir(), "helm-ingress-"));
  t = await createTestApp();
  base = await t.app.listen({ host: "127.0.0.1", port: 0 });
});
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  await t?.close();
});

test("the Ingress routes every public route of the app, and no agent API route, probe or /metrics", async () => {
  const paths = await ingressPaths();
  const urls = [...new Set(registeredRoutes(t.app).map((r) => concrete(r.url)))];
  const agent = urls.filter((u) => u.startsWith("/agent/v1/"));
  assert.ok(agent.length >= 8, `the agent API's routes: ${agent.join(", ")}`);
  for (const probe of ["/healthz", "/readyz"]) assert.ok(urls.includes(probe), probe);
  const published = urls.filter((u) => !PRIVATE.test(u));
  for (const u of ["/", "/api/v1/whoami", "/api/v1/hooks/x/x/x", "/api/v1/graph-hooks/x/x/x/x", "/login", "/oauth/callback", "/p/x/x/runs"])
    assert.ok(published.includes(u), `${u} is one of the app's routes`);
  const unrouted = published.filter((u) => !paths.some((p) => matches(p, u)));
  assert.deepEqual(unrouted, [], "public routes the Ingress does not route: add a path to templates/ingest-ingress.yaml");
  for (const u of urls.filter((x) => PRIVATE.test(x))) {
    const by = paths.filter((p) => matches(p, u) || laxMatches(p, u) || laxMatches(p, `${u}/`));
    assert.deepEqual(by, [], `${u} must not be published`);
  }
});

test("agent paths spelled another way through the public prefixes reach no agent route (404)", async () => {
  const hostile = [
    "/agent%2Fv1/claim",
    "/agent%2fv1/journal",
    "/AGENT/v1/claim",
    "/Agent/V1/journal",
    "//agent/v1/claim",
    "//agent/v1/journal",
    "/api/v1/../../agent/v1/claim",
    "/api/v1/%2e%2e/%2e%2e/agent/v1/claim",
    "/api/v1/..%2f..%2fagent/v1/journal",
    "/p/../agent/v1/heartbeat",
    "/console/..%2Fagent/v1/finish",
    "/api/v1/hooks/..%2F..%2F..%2Fagent/v1/journal",
    "/api/v1//agent/v1/claim",
    "/agent/v1%2Fclaim",
  ];
  for (const path of hostile) {
    for (const req of [
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
      `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer flj_${"A".repeat(43)}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    ]) {
      const answer = await rawRequest(base, req);
      assert.match(answer, /^HTTP\/1\.1 404 /, `${path}: ${answer.slice(0, 300)}`);
    }
  }
  // The same agent route by its own path is there (401 without a job token): the 404s above are not a missing route.
  const direct = await rawRequest(
    base,
    `POST /agent/v1/claim HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
  );
  assert.match(direct, /^HTTP\/1\.1 401 /, direct.slice(0, 300));
});

test("ingest.ingress: host, className, tls and annotations kept; extraPaths added after the public ones, never one that reaches the agent API", async () => {
  const paths = await ingressPaths([
    "--set",
    "ingest.ingress.extraPaths[0].path=/docs",
    "--set",
    "ingest.ingress.extraPaths[1].path=/status",
    "--set",
    "ingest.ingress.extraPaths[1].pathType=Exact",
  ]);
  assert.deepEqual(paths.slice(-2), [
    { path: "/docs", pathType: "Prefix" },
    { path: "/status", pathType: "Exact" },
  ]);
  assert.deepEqual(paths[0], { path: "/", pathType: "Exact" });
  const kept = await helm([
    ...["--set", "ingest.ingress.host=flows.example.com", "--set", "ingest.ingress.className=nginx"],
    ...["--set", "ingest.ingress.tls.enabled=true", "--set", "ingest.ingress.annotations.a\\.example\\.com/x=y"],
  ]);
  const spec = parseAllDocuments(kept.stdout)[0]!.toJS() as { metadata: { annotations: unknown }; spec: Record<string, unknown> };
  assert.deepEqual(spec.metadata.annotations, { "a.example.com/x": "y" });
  assert.equal(spec.spec.ingressClassName, "nginx");
  assert.deepEqual(spec.spec.tls, [{ hosts: ["flows.example.com"], secretName: "r-flowsvc-ingest-tls" }]);
  assert.equal((spec.spec.rules as Array<{ host: string }>)[0]!.host, "flows.example.com");
  const refusals = [
    ["/", "Prefix", /extraPaths\[0\]: Prefix \/ would publish the agent API/],
    ["/a", "Prefix", /extraPaths\[0\]: Prefix \/a would publish the agent API/],
    ["/Agent/v1", "Prefix", /extraPaths\[0\]: Prefix \/Agent\/v1 would publish the agent API/],
    ["/agent/v1/claim", "Exact", /extraPaths\[0\]: Exact \/agent\/v1\/claim would publish the agent API/],
    ["/docs//agent", "Prefix", /extraPaths\[0\]\.path: \/docs\/\/agent has an empty, \. or \.\. segment/],
    ["/docs/../agent", "Prefix", /extraPaths\[0\]\.path: \/docs\/\.\.\/agent has an empty, \. or \.\. segment/],
    ["/agent%2Fv1", "Prefix", /ingest\.ingress\.extraPaths\.0\.path: Does not match pattern/],
    ["/docs\u0000", "Prefix", /ingest\.ingress\.extraPaths\.0\.path: Does not match pattern/],
    ["/docs", "ImplementationSpecific", /ingest\.ingress\.extraPaths\.0\.pathType: .* must be one of the following: "Prefix", "Exact"/],
    ["/" + "1".repeat(600), "Prefix", /ingest\.ingress\.extraPaths\.0\.path: String length must be less than or equal to 512/],
  ] as const;
  // One helm per case, at once (each its own values file).
  const answers = await Promise.all(
    refusals.map(([path, type], i) => {
      const values = join(dir, `extra-${i}.json`);
      writeFileSync(values, JSON.stringify({ ingest: { ingress: { extraPaths: [{ path, pathType: type }] } } }));
      return helm(["-f", values]);
    }),
  );
  for (const [i, [path, type, why]] of refusals.entries()) {
    assert.equal(answers[i]!.code, 1, `${type} ${path} rendered: ${answers[i]!.stdout}`);
    assert.match(answers[i]!.stderr, why, `${type} ${path}`);
  }
});
