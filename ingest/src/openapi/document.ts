/**
 * The OpenAPI 3.1 document of `/api/v1` (issue 15, item 6), built from the routes Fastify
 * registered: each route's method and path, and its description (route-doc.ts) with the zod
 * schemas its handler parses with, turned into JSON Schema 2020-12 (OpenAPI 3.1's dialect) by
 * zod's own z.toJSONSchema. The error answers come from core's one error table. Nothing here is
 * written per route: a route added anywhere appears with what it declares.
 */
import { z } from "zod";
import type { FastifyInstance } from "fastify";
import { ERROR_CODES } from "@flowsvc/core";
import type { JsonSchema, RouteAuth, RouteDoc } from "./route-doc.js";

/** A route as Fastify registered it (collected by an onRoute hook: every route of every plugin). */
export interface RegisteredRoute {
  method: string;
  url: string;
  doc: RouteDoc | undefined;
}

const catalogs = new WeakMap<FastifyInstance, RegisteredRoute[]>();

/** Collects every route registered from now on (call before the plugins are registered). */
export const catalogRoutes = (app: FastifyInstance): RegisteredRoute[] => {
  const routes: RegisteredRoute[] = [];
  catalogs.set(app, routes);
  app.addHook("onRoute", (opts) => {
    for (const method of [opts.method].flat()) routes.push({ method: method.toUpperCase(), url: opts.url, doc: opts.config?.api });
  });
  return routes;
};

/** Every route the app registered (HEAD routes Fastify adds for GET included). */
export const registeredRoutes = (app: FastifyInstance): readonly RegisteredRoute[] => catalogs.get(app) ?? [];

/** `/api/v1/orgs/:org/runs/:id` -> `/api/v1/orgs/{org}/runs/{id}`. */
export const openApiPath = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

const pathParamNames = (url: string): string[] => [...url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);

const isZod = (s: unknown): s is z.ZodType => typeof s === "object" && s !== null && "_zod" in s;

type Schemas = Record<string, JsonSchema>;

/**
 * A zod schema as the JSON Schema a caller must send (`io: "input"`: a defaulted field is optional).
 * Definitions it shares ($defs, for recursive JSON) move to components.schemas under `prefix`.
 */
const jsonSchemaOf = (schema: z.ZodType | JsonSchema, prefix: string, shared: Schemas): JsonSchema => {
  if (!isZod(schema)) return schema;
  const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as JsonSchema;
  delete json.$schema;
  const defs = (json.$defs ?? {}) as Schemas;
  delete json.$defs;
  const names = Object.keys(defs);
  for (const name of names) shared[`${prefix}_${name}`] = defs[name]!;
  if (names.length === 0) return json;
  // Refs point at the document's root in OpenAPI: `#/$defs/x` becomes `#/components/schemas/<prefix>_x`.
  const text = JSON.stringify({ json, defs }).replace(/"#\/\$defs\/([^"]+)"/g, (_m, n: string) => `"#/components/schemas/${prefix}_${n}"`);
  const moved = JSON.parse(text) as { json: JsonSchema; defs: Schemas };
  for (const name of names) shared[`${prefix}_${name}`] = moved.defs[name]!;
  return moved.json;
};

const ROLE_AUTH: ReadonlySet<RouteAuth> = new Set(["viewer", "member", "admin"]);

/** The error statuses a route may answer: what every route may, what its auth and body imply, and its own. */
const errorStatuses = (doc: RouteDoc, url: string): number[] => {
  const out = new Set([400, 500, 503]);
  if (ROLE_AUTH.has(doc.auth)) [401, 403, 404].forEach((s) => out.add(s));
  if (doc.auth === "user" || doc.auth === "hook") out.add(401);
  if (doc.auth === "hook") out.add(404);
  if (doc.body) out.add(413);
  if (pathParamNames(url).length > 0) out.add(414);
  for (const s of doc.errors ?? []) out.add(s);
  return [...out].sort((a, b) => a - b);
};

/** One response per HTTP status of core's error table, naming its codes. */
const errorResponses = (): Record<string, unknown> => {
  const byStatus = new Map<number, string[]>();
  for (const [code, { http, summary }] of Object.entries(ERROR_CODES))
    byStatus.set(http, [...(byStatus.get(http) ?? []), `\`${code}\`: ${summary}`]);
  return Object.fromEntries(
    [...byStatus].map(([status, lines]) => [
      `E${status}`,
      { description: lines.join("; "), content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } },
    ]),
  );
};

const ERROR_SCHEMA: JsonSchema = {
  type: "object",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "string", enum: Object.keys(ERROR_CODES) },
        message: { type: "string", description: "what was wrong and where (a field's path, `nodes[3].config.url: required`)" },
        hint: { type: "string", description: "what to do about it" },
        details: { type: "object", additionalProperties: true },
      },
    },
  },
};

const SECURITY: Record<RouteAuth, unknown[]> = {
  viewer: [{ bearer: [] }],
  member: [{ bearer: [] }],
  admin: [{ bearer: [] }],
  user: [{ bearer: [] }],
  hook: [{ hookSecret: [] }, { hookSecretQuery: [] }, {}],
  none: [],
};

const AUTH_NOTE: Record<RouteAuth, string> = {
  viewer: "Needs the viewer role (or above) on the project.",
  member: "Needs the member role (or above) on the project.",
  admin: "Needs the admin role on the project.",
  user: "Needs any API token.",
  hook: "No API token: the hook's secret (X-Flow-Hook-Secret or ?secret=) or the delivery's signature (GitHub, HMAC hooks) is the credential.",
  none: "No authentication.",
};

const operationId = (method: string, url: string): string =>
  `${method.toLowerCase()}_${url
    .replace(/^\/api\/v1\//, "")
    .replace(/[:{}]/g, "")
    .replace(/[^A-Za-z0-9]+/g, "_")}`;

interface Built {
  shared: Schemas;
}

const parametersOf = (route: RegisteredRoute, doc: RouteDoc, built: Built, id: string): unknown[] => {
  const params = doc.params ? jsonSchemaOf(doc.params, `${id}_params`, built.shared) : {};
  const paramProps = (params.properties ?? {}) as Schemas;
  const path = pathParamNames(route.url).map((name) => ({
    name,
    in: "path",
    required: true,
    schema: paramProps[name] ?? { type: "string" },
  }));
  if (!doc.query) return path;
  const query = jsonSchemaOf(doc.query, `${id}_query`, built.shared);
  const required = new Set((query.required ?? []) as string[]);
  const props = (query.properties ?? {}) as Schemas;
  return [...path, ...Object.entries(props).map(([name, schema]) => ({ name, in: "query", required: required.has(name), schema }))];
};

/** Required unless the route's schema takes an absent body (a cancel without a reason). */
const requestBodyOf = (doc: RouteDoc, built: Built, id: string): unknown => {
  if (!doc.body) return undefined;
  const required = isZod(doc.body) ? !doc.body.safeParse(undefined).success : true;
  return { required, content: { [doc.bodyType ?? "application/json"]: { schema: jsonSchemaOf(doc.body, `${id}_body`, built.shared) } } };
};

const successOf = (doc: RouteDoc, built: Built, id: string): [string, unknown] => {
  const r = doc.response ?? {};
  const status = r.status ?? 200;
  if (status === 204) return ["204", { description: r.description ?? "done; no content" }];
  const schema = r.schema ? jsonSchemaOf(r.schema, `${id}_response`, built.shared) : {};
  return [String(status), { description: r.description ?? "success", content: { [r.contentType ?? "application/json"]: { schema } } }];
};

const operationOf = (route: RegisteredRoute, doc: RouteDoc, built: Built): Record<string, unknown> => {
  const id = operationId(route.method, route.url);
  const [status, success] = successOf(doc, built, id);
  const errors = Object.fromEntries(errorStatuses(doc, route.url).map((s) => [String(s), { $ref: `#/components/responses/E${s}` }]));
  const requestBody = requestBodyOf(doc, built, id);
  return {
    operationId: id,
    summary: doc.summary,
    description: [doc.description, AUTH_NOTE[doc.auth]].filter(Boolean).join("\n\n"),
    tags: [doc.tag],
    security: SECURITY[doc.auth],
    parameters: parametersOf(route, doc, built, id),
    ...(requestBody ? { requestBody } : {}),
    responses: { [status]: success, ...errors },
  };
};

/** The document: every documented `/api/v1` route (an undocumented one is left out: openapi.test.ts fails on it). */
export const buildOpenApi = (routes: readonly RegisteredRoute[], version: string): Record<string, unknown> => {
  const built: Built = { shared: {} };
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Set<string>();
  for (const route of routes) {
    if (!route.url.startsWith("/api/v1/") || route.method === "HEAD" || !route.doc) continue;
    const item = (paths[openApiPath(route.url)] ??= {});
    item[route.method.toLowerCase()] = operationOf(route, route.doc, built);
    tags.add(route.doc.tag);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "flowsvc user API",
      version,
      description:
        "The user API of flowsvc (`/api/v1`). Errors answer `{error: {code, message, hint?, details?}}`; the README's Error codes table lists the codes.",
    },
    tags: [...tags].sort().map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "An API token (`flw_...`): `flow login` saves one" },
        hookSecret: { type: "apiKey", in: "header", name: "X-Flow-Hook-Secret" },
        hookSecretQuery: { type: "apiKey", in: "query", name: "secret" },
      },
      schemas: { Error: ERROR_SCHEMA, ...built.shared },
      responses: errorResponses(),
    },
  };
};
