import { z } from "zod";
import type { FastifyPluginCallback, FastifyRequest } from "fastify";
import { CREDENTIAL_BODY_JSON_SCHEMA, FlowError, assertCredentialName, parseCredentialValue } from "@flowsvc/core";
import { listCredentials } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";

const NameParams = z.object({ name: z.string() });

const nameOf = (req: FastifyRequest): string => {
  const { name } = NameParams.parse(req.params);
  assertCredentialName(name);
  return name;
};

/**
 * `{scoped}/credentials`: typed, write-only values (spec, "Credential"). Like secrets, no route
 * answers with a value or any stored field: only names, kinds and set times. Roles as for secrets:
 * viewer lists, admin sets and removes.
 */
export const credentialRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const { pool, resources } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/credentials";

  app.get(
    base,
    api({ summary: "List credentials: names, kinds and set times, never values", tag: "credentials", auth: "viewer" }),
    async (req) => {
      const scope = await authorize(pool, req, "viewer");
      return listCredentials(pool, scope.projectId);
    },
  );

  app.get(
    `${base}/:name`,
    api({ summary: "A credential's kind and set time", tag: "credentials", auth: "viewer", params: NameParams }),
    async (req) => {
      const scope = await authorize(pool, req, "viewer");
      const name = nameOf(req);
      const found = (await listCredentials(pool, scope.projectId)).find((c) => c.name === name);
      if (!found)
        throw new FlowError("not_found", `credential ${name} is not set in ${scope.org}/${scope.project}`, {
          hint: `set it with \`flow credential set ${name} --kind bearer --token -\``,
        });
      return found;
    },
  );

  // `{kind, ...fields}`: core's parseCredentialValue names every bad field at once; nothing is written before it passes.
  app.put(
    `${base}/:name`,
    api({
      summary: "Create or replace a credential",
      tag: "credentials",
      auth: "admin",
      params: NameParams,
      body: CREDENTIAL_BODY_JSON_SCHEMA,
    }),
    async (req) => {
      const scope = await authorize(pool, req, "admin");
      const name = nameOf(req);
      const value = parseCredentialValue(name, req.body);
      return resources.putCredential(scope, name, value);
    },
  );

  const removeDoc = api({
    summary: "Delete a credential",
    tag: "credentials",
    auth: "admin",
    params: NameParams,
    response: { status: 204 },
  });
  app.delete(`${base}/:name`, removeDoc, async (req, reply) => {
    const scope = await authorize(pool, req, "admin");
    const name = nameOf(req);
    if (!(await resources.deleteCredential(scope, name)))
      throw new FlowError("not_found", `credential ${name} is not set in ${scope.org}/${scope.project}`, {
        hint: "list them with `flow credential list`",
      });
    return reply.status(204).send();
  });
  done();
};
