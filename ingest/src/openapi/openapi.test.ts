/**
 * `GET /api/v1/openapi.json` (openapi/document.ts) over app.inject(): every `/api/v1` route Fastify
 * registered is in the document with its method, path parameters, body schema and error answers;
 * a route without a description (openapi/route-doc.ts) fails here, so a new route cannot be
 * forgotten. The document has OpenAPI 3.1's shape and every `$ref` in it resolves, and its body
 * schemas refuse what their routes refuse (checked with a JSON Schema 2020-12 validator).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { ask, assertError, createTestApp, type TestApp } from "../testing/test-app.js";
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

/** A compiled JSON Schema: true when `data` is valid. */
interface Validator {
  (data: unknown): boolean;
  errors?: unknown[] | null;
}
// Ajv 8, the JSON Schema 2020-12 validator Fastify itself brings (@fastify/ajv-compiler's): no dependency of ours.
const fromFastify = createRequire(createRequire(import.meta.url).resolve("@fastify/ajv-compiler"));
const Ajv2020 = (fromFastify("ajv/dist/2020") as { default: new (opts: object) => { compile(schema: object): Validator } }).default;

const SCOPED = "/api/v1/orgs/{org}/projects/{project}";
/** A request to a route: the operation in the document (`PUT <template>`), and the body. */
type Sent = { op: string; url: (base: string) => string; body: unknown };
const send = (op: string, path: string, body: unknown): Sent => ({
  op: `${op} ${SCOPED}${path}`,
  url: (base) => `${base}${path.replace("{name}", "DOC_PROBE")}`,
  body,
});
const script = { kind: "script", source: "echo hi\n", filename: "h.sh" };

/** Bodies each route refuses (a 400, for the reason its message names), with the rule the document must say too. */
const REFUSED: Array<[string, Sent, RegExp]> = [
  ["an event type with a blank", send("POST", "/events", { type: "a b" }), /^type: event type "a b" must be 1-64 characters/],
  ["an event type of 65 characters", send("POST", "/events", { type: "a".repeat(65) }), /^type: event type "a{65}" must be 1-64/],
  ["a hook's event type with a blank", send("PUT", "/event-hooks/{name}", { event_type: "a b" }), /event type "a b" must be 1-64/],
  [
    "a hook's event type of 65 characters",
    send("PUT", "/event-hooks/{name}", { event_type: "e".repeat(65) }),
    /event type "e{65}" must be 1-64/,
  ],
  ["an unknown manifest", send("PUT", "/event-hooks/{name}", { manifest: "gitlab", key: "k" }), /^unknown manifest "gitlab"/],
  ["a handler pattern with a blank inside", send("PUT", "/handlers/{name}", { on: ["a b"], reaction: script }), /^on: pattern "a b"/],
  ["a handler pattern *.x", send("PUT", "/handlers/{name}", { on: ["*.x"], reaction: script }), /^on: pattern "\*\.x"/],
  ["an empty secret value", send("PUT", "/secrets/{name}", { value: "" }), /the value is empty/],
  ["a NUL in a secret value", send("PUT", "/secrets/{name}", { value: "a\u0000b" }), /value holds a NUL/],
  ["a lone surrogate in a secret value", send("PUT", "/secrets/{name}", { value: "a\ud800" }), /value holds a lone UTF-16 surrogate/],
  [
    "an unknown credential kind",
    send("PUT", "/credentials/{name}", { kind: "password", token: "t" }),
    /kind: must be one of bearer, api-key, basic, url-token; got "password"/,
  ],
  ["an empty credential token", send("PUT", "/credentials/{name}", { kind: "bearer", token: "" }), /token: the value is empty/],
  [
    "a line break in a credential token",
    send("PUT", "/credentials/{name}", { kind: "bearer", token: "a\nb" }),
    /token: it holds a control character/,
  ],
  [
    "a field of another kind",
    send("PUT", "/credentials/{name}", { kind: "bearer", token: "t", password: "p" }),
    /password: a bearer credential has no such field/,
  ],
  [
    "an api-key header that frames the request",
    send("PUT", "/credentials/{name}", { kind: "api-key", header: "Content-Length", value: "v" }),
    /header: header "Content-Length" frames the request/,
  ],
  [
    "a basic username with a colon",
    send("PUT", "/credentials/{name}", { kind: "basic", username: "a:b", password: "p" }),
    /username: the username holds ":"/,
  ],
  ["a user name with a blank", send("POST", "/users", { name: "a b", role: "viewer" }), /^user name "a b" is not allowed/],
  [
    "an account name with a slash",
    send("POST", "/accounts/connect", { name: "a/b", provider: "gh" }),
    /^credential name "a\/b" is not allowed/,
  ],
  [
    "a token label on two lines",
    { op: "POST /api/v1/tokens", url: () => "/api/v1/tokens", body: { label: "a\nb" } },
    /token label holds a control character/,
  ],
];

/** Bodies each route takes (a 2xx), some at the edge of a rule: the document must not refuse them either. */
const ACCEPTED: Array<[string, Sent]> = [
  ["an event type of 64 characters", send("POST", "/events", { type: "a".repeat(64) })],
  ["a hook's event type", send("PUT", "/event-hooks/{name}", { event_type: "ci.done" })],
  ["handler patterns, blanks trimmed", send("PUT", "/handlers/{name}", { on: ["*", " deploy.* ", "a.b"], reaction: script })],
  ["a secret value with an emoji (a surrogate pair)", send("PUT", "/secrets/{name}", { value: "k\u{1F600}y" })],
  ["an api_key credential", send("PUT", "/credentials/{name}", { kind: "api_key", header: "X-Api-Key", value: "v" })],
  ["a url-token credential", send("PUT", "/credentials/{name}", { kind: "url-token", token: "t" })],
  ["a user name like an e-mail address", send("POST", "/users", { name: "ann+ci@example.com", role: "viewer" })],
  ["a token label with an emoji", { op: "POST /api/v1/tokens", url: () => "/api/v1/tokens", body: { label: "ci \u{1F680}" } }],
];

test("every request body schema compiles as JSON Schema 2020-12, and refuses what its route refuses", async () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validators = new Map<string, Validator>();
  for (const [path, item] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(item)) {
      const schema = op.requestBody?.content["application/json"]?.schema;
      // The document's components go along: a body's $ref points at them.
      if (schema) validators.set(`${method.toUpperCase()} ${path}`, ajv.compile({ ...schema, components: doc.components }));
    }
  assert.ok(validators.size >= 15, `only ${validators.size} JSON bodies`);
  const check = async ([what, sent, message]: [string, Sent, RegExp?], refused: boolean): Promise<void> => {
    const validate = validators.get(sent.op);
    assert.ok(validate, `${what}: ${sent.op} is in the document with a JSON body`);
    const res = await ask(t, sent.op.startsWith("PUT") ? "PUT" : "POST", sent.url(t.project.base), { as: "admin", body: sent.body });
    if (refused) assertError(res, 400, message!, `${what}: the route refuses it`);
    else assert.ok(res.status >= 200 && res.status < 300, `${what}: the route takes it: ${res.status} ${res.text}`);
    assert.equal(
      validate(sent.body),
      !refused,
      `${what}: the document's schema agrees with the route (${JSON.stringify(validate.errors)})`,
    );
  };
  for (const c of REFUSED) await check(c, true);
  for (const c of ACCEPTED) await check(c, false);
});

test("the credential kinds come from core, each spelling once", () => {
  const body = doc.paths[`${SCOPED}/credentials/{name}`]!["put"]!.requestBody!.content["application/json"]!.schema as {
    oneOf: Array<{ properties: { kind: { enum: string[] } } }>;
  };
  const spellings = body.oneOf.flatMap((shape) => shape.properties.kind.enum);
  assert.deepEqual(spellings, [...new Set(spellings)], "no spelling is written twice");
  assert.deepEqual(new Set(spellings), new Set(["bearer", "api_key", "api-key", "basic", "url_token", "url-token"]));
});
