/**
 * How a route describes itself for the OpenAPI document (openapi.ts): in its Fastify options,
 * `{ config: { api: { ... } } }` (or `...api({ ... })`), next to the code, with the same zod schemas
 * the handler parses with. Every `/api/v1` route must have one: openapi.test.ts walks every route
 * Fastify registered and fails on a route without it, so a new route is documented or refused.
 */
import type { z } from "zod";

/** Who may call: a project role, any user token (`user`), a hook's secret or signature (`hook`), or anyone (`none`). */
export type RouteAuth = "viewer" | "member" | "admin" | "user" | "hook" | "none";

/** A JSON Schema written out, for a body whose rules core keeps without zod (credentials: the CLI must not load zod). */
export type JsonSchema = Record<string, unknown>;

export interface RouteDoc {
  summary: string;
  description?: string;
  /** The group it is listed under (`runs`, `secrets`, ...). */
  tag: string;
  auth: RouteAuth;
  /** Path parameters' schemas; a `:param` of the path without one is a string. */
  params?: z.ZodObject;
  query?: z.ZodObject;
  /**
   * The JSON body's schema, or `null` for a route that takes none. Required (even as null) for
   * POST, PUT and PATCH: the test refuses a writing route that does not say.
   */
  body?: z.ZodType | JsonSchema | null;
  /** The body's content type when it is not application/json (hook ingest takes any: its bytes are signed). */
  bodyType?: string;
  /** The success answer: its status (200), what it holds, and its content type (application/json). */
  response?: { status?: number; description?: string; schema?: z.ZodType | JsonSchema; contentType?: string };
  /** Error statuses besides those its auth and body imply (409, 422, 429, ...). */
  errors?: number[];
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** This route in the OpenAPI document (openapi/route-doc.ts). */
    api?: RouteDoc;
  }
}

/** `app.get(path, api({...}), handler)`: the route options that carry its description. */
export const api = (doc: RouteDoc): { config: { api: RouteDoc } } => ({ config: { api: doc } });
