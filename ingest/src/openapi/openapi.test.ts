/**
 * `GET /api/v1/openapi.json` (openapi/document.ts) over app.inject(): every `/api/v1` route Fastify
 * registered is in the document with its method, path parameters, body schema and error answers;
 * a route without a description (openapi/route-doc.ts) fails here, so a new route cannot be
 * forgotten. The document has OpenAPI 3.1's shape and every `$ref` in it resolves.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, createTestApp, type TestApp } from "../testing/test-app.js";
import { openApiPath, registeredRoutes } from "./document.js";

let t: TestApp;
let doc: {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; responses: Record<string, unknown>; securitySchemes: Record<string, unknown> };
};
interface Operation {
  operationId: string;
  parameters: Array<{ name: string; in: string; required: boolean; schema: unknown }>;
  requestBody?: { required: boolean; content: Record<string, { schema: Record<string, unknown> }> };
  responses: Record<string, { description?: string; $ref?: string }>;
  security: unknown[];
}

before(async () => {
  t = await createTestApp();
  const res = await ask(t, "GET", "/api/v1/openapi.json", { as: "none" });
  assert.equal(res.status, 200, res.text);
  assert.match(String(res.res.headers["content-type"]), /^application\/json/);
  doc = res.body as typeof doc;
});
after(() => t.close());

const WRITES = new Set(["POST", "PUT", "PATCH"]);
const userRoutes = () => registeredRoutes(t.app).filter((r) => r.url.startsWith("/api/v1/") && r.method !== "HEAD");

test("every registered /api/v1 route is described, and is in the document with its method", () => {
  const routes = userRoutes();
  assert.ok(routes.length >= 30, `only ${routes.length} routes were seen`);
  const undocumented = routes.filter((r) => !r.doc).map((r) => `${r.method} ${r.url}`);
  assert.deepEqual(undocumented, [], "routes without `config.api` (ingest/src/openapi/route-doc.ts)");
  const silentWrites = routes.filter((r) => WRITES.has(r.method) && r.doc && !("body" in r.doc)).map((r) => `${r.method} ${r.url}`);
  assert.deepEqual(silentWrites, [], "writing routes must say their body's schema (or body: null)");
  for (const r of routes) {
    const op = doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()];
    assert.ok(op, `${r.method} ${r.url} is missing from the document`);
  }
  const inDoc = Object.values(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0);
  assert.equal(inDoc, routes.length, "nothing in the document that is not a route");
});

test("each operation has its path parameters, its body's schema and its error answers", () => {
  for (const r of userRoutes()) {
    const op = doc.paths[openApiPath(r.url)]![r.method.toLowerCase()]!;
    const names = [...r.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]);
    const pathParams = op.parameters.filter((p) => p.in === "path");
    assert.deepEqual(
      pathParams.map((p) => p.name),
      names,
      `${r.method} ${r.url}: path parameters`,
    );
    assert.ok(
      pathParams.every((p) => p.required && typeof p.schema === "object"),
      `${r.method} ${r.url}: path parameters are required, with a schema`,
    );
    if (r.doc?.body) {
      const content = Object.values(op.requestBody?.content ?? {});
      assert.ok(content.length === 1 && typeof content[0]!.schema === "object", `${r.method} ${r.url}: body schema`);
      assert.ok(op.responses["413"], `${r.method} ${r.url}: a body can be too large`);
    }
    assert.ok(
      Object.keys(op.responses).some((s) => /^2\d\d$/.test(s)),
      `${r.method} ${r.url}: a success answer`,
    );
    assert.ok(op.responses["400"] && op.responses["500"], `${r.method} ${r.url}: 400 and 500`);
    if (r.doc?.auth !== "none") assert.ok(op.responses["401"], `${r.method} ${r.url}: 401`);
    if (["viewer", "member", "admin"].includes(r.doc!.auth)) {
      assert.ok(op.responses["403"] && op.responses["404"], `${r.method} ${r.url}: 403 and 404`);
      assert.deepEqual(op.security, [{ bearer: [] }]);
    }
  }
});

test("the submit, runs list and hook routes carry core's schemas", () => {
  const runs = doc.paths["/api/v1/orgs/{org}/projects/{project}/runs"]!;
  const submit = runs["post"]!.requestBody!;
  assert.equal(submit.required, true);
  // A union: the script body, a graph document (`as: "graph"`), a stored graph by name (routes/graph-submit.ts) and a pipeline (`as: "pipeline"`).
  type Body = { properties: Record<string, { const?: unknown }>; required: string[] };
  const bodies = (submit.content["application/json"]!.schema as { anyOf?: Body[] }).anyOf ?? [];
  assert.equal(bodies.length, 4, JSON.stringify(submit).slice(0, 300));
  const [script, graphDoc, stored, pipeline] = bodies as [Body, Body, Body, Body];
  assert.equal(pipeline.properties["as"]?.const, "pipeline");
  assert.ok(script.properties["source"] && script.required.includes("source"), JSON.stringify(script).slice(0, 300));
  assert.equal(graphDoc.properties["as"]?.const, "graph");
  assert.deepEqual(
    [graphDoc.required.includes("source"), graphDoc.required.includes("filename"), "input" in graphDoc.properties],
    [true, true, true],
  );
  assert.deepEqual([stored.required, "input" in stored.properties], [["graph"], true]);
  assert.equal(runs["post"]!.responses["201"]?.description !== undefined, true);
  const status = runs["get"]!.parameters.find((p) => p.name === "status")!;
  assert.deepEqual([status.in, status.required, (status.schema as { enum: string[] }).enum.includes("parked")], ["query", false, true]);
  const hook = doc.paths["/api/v1/hooks/{org}/{project}/{name}"]!["post"]!;
  assert.ok(hook.requestBody?.content["*/*"], "hook ingest takes any content type");
  assert.deepEqual(hook.security, [{ hookSecret: [] }, { hookSecretQuery: [] }, {}]);
});

test("the document has OpenAPI 3.1's shape: unique operation ids, and every $ref resolves", () => {
  assert.equal(doc.openapi, "3.1.0");
  assert.equal(typeof doc.info.title, "string");
  assert.equal(typeof doc.info.version, "string");
  assert.ok(doc.components.schemas["Error"] && doc.components.securitySchemes["bearer"]);
  const ids = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
  assert.equal(new Set(ids).size, ids.length, "operation ids are unique");
  for (const path of Object.keys(doc.paths)) assert.match(path, /^\/api\/v1\/[A-Za-z0-9_.{}/-]+$/);
  const refs: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) return v.forEach(walk);
    if (typeof v !== "object" || v === null) return;
    for (const [k, x] of Object.entries(v))
      if (k === "$ref" && typeof x === "string") refs.push(x);
      else walk(x);
  };
  walk(doc);
  assert.ok(refs.length > 0);
  for (const ref of refs) {
    assert.match(ref, /^#\/components\//, `a local ref: ${ref}`);
    const target = ref
      .slice(2)
      .split("/")
      .reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], doc);
    assert.ok(target !== undefined, `${ref} resolves`);
  }
});
