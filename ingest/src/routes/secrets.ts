import { z } from "zod";
import type { FastifyPluginCallback, FastifyRequest } from "fastify";
import { FlowError, SecretSetBody, envNameProblem, parseSecretValue } from "@flowsvc/core";
import { getSecretMeta, listSecrets } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";

const NameParams = z.object({ name: z.string() });

/**
 * The name of a secret to look up or delete: any environment variable name, so that a secret
 * stored before a name was reserved (core/src/secret-rules.ts) can still be seen and removed.
 * Setting one takes the whole rule (assertSecretName).
 */
const lookupName = (req: FastifyRequest): string => {
  const { name } = NameParams.parse(req.params);
  const problem = envNameProblem(name);
  if (problem !== undefined) throw new FlowError("invalid_argument", problem, { details: { field: "name" } });
  return name;
};

/** Secrets are write-only: no route answers with a value, only names and set times. */
export const secretRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const { pool, resources } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/secrets";

  app.get(base, api({ summary: "List secrets: names and set times, never values", tag: "secrets", auth: "viewer" }), async (req) => {
    const scope = await authorize(pool, req, "viewer");
    return listSecrets(pool, scope.projectId);
  });

  app.get(
    `${base}/:name`,
    api({ summary: "Whether a secret is set, and when", tag: "secrets", auth: "viewer", params: NameParams }),
    async (req) => {
      const scope = await authorize(pool, req, "viewer");
      const name = lookupName(req);
      const meta = await getSecretMeta(pool, scope.projectId, name);
      if (!meta)
        throw new FlowError("not_found", `secret ${name} is not set in ${scope.org}/${scope.project}`, {
          hint: `set it with \`flow secret set ${name} -\``,
        });
      return { name: meta.name, exists: true, set_at: meta.set_at };
    },
  );

  app.put(
    `${base}/:name`,
    api({ summary: "Create or replace a secret", tag: "secrets", auth: "admin", params: NameParams, body: SecretSetBody }),
    async (req) => {
      const scope = await authorize(pool, req, "admin");
      const { name } = NameParams.parse(req.params);
      return resources.putSecret(scope, name, parseSecretValue(name, req.body));
    },
  );

  const removeDoc = api({ summary: "Delete a secret", tag: "secrets", auth: "admin", params: NameParams, response: { status: 204 } });
  app.delete(`${base}/:name`, removeDoc, async (req, reply) => {
    const scope = await authorize(pool, req, "admin");
    const name = lookupName(req);
    if (!(await resources.deleteSecret(scope, name)))
      throw new FlowError("not_found", `secret ${name} is not set in ${scope.org}/${scope.project}`);
    return reply.status(204).send();
  });
  done();
};
