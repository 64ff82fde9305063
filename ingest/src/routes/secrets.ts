import { z } from "zod";
import type { FastifyInstance } from "fastify";
import { FlowError } from "@flowsvc/core";
import { deleteSecret, getSecretMeta, listSecrets, upsertSecret } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { ENV_NAME } from "./runs.js";

export const SECRET_VALUE_LIMIT = 64 * 1024;

const NameParams = z.object({
  org: z.string(),
  project: z.string(),
  name: z
    .string()
    .max(256)
    .regex(ENV_NAME, "a secret name is an environment variable name: letters, digits and _, not starting with a digit")
    .refine((n) => !n.startsWith("FLOW_"), "names starting with FLOW_ are reserved for the service's own variables"),
});
const SetBody = z.object({ value: z.string().min(1, "the value is empty").max(SECRET_VALUE_LIMIT, `a secret value is at most ${SECRET_VALUE_LIMIT} bytes`) }).strict();

/** Secrets are write-only: no route answers with a value, only names and set times. */
export const secretRoutes = (app: FastifyInstance, deps: IngestDeps): void => {
  const { pool, keyring } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/secrets";

  app.get(base, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    return listSecrets(pool, scope.projectId);
  });

  app.get(`${base}/:name`, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { name } = NameParams.parse(req.params);
    const meta = await getSecretMeta(pool, scope.projectId, name);
    if (!meta) throw new FlowError("not_found", `secret ${name} is not set in ${scope.org}/${scope.project}`, { hint: `set it with \`flow secret set ${name} -\`` });
    return { name: meta.name, exists: true, set_at: meta.set_at };
  });

  app.put(`${base}/:name`, async (req) => {
    const scope = await authorize(pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    const { value } = SetBody.parse(req.body);
    const sealed = await keyring.seal(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "secret", name }, value);
    return upsertSecret(pool, scope.projectId, name, sealed);
  });

  app.delete(`${base}/:name`, async (req, reply) => {
    const scope = await authorize(pool, req, "admin");
    const { name } = NameParams.parse(req.params);
    if (!(await deleteSecret(pool, scope.projectId, name))) throw new FlowError("not_found", `secret ${name} is not set in ${scope.org}/${scope.project}`);
    return reply.status(204).send();
  });
};
