/**
 * `POST {scoped}/users` (`flow user add`, README "Roles"): a project admin adds a person: the user,
 * their role on this project and their first API token, in one transaction (store addUserWithToken).
 * The token is in the answer only (its digest is what is stored); a name that exists is a conflict
 * and nothing is written: `flow member set` is how an existing user joins another project.
 */
import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { ROLES, USER_NAME_JSON_SCHEMA, assertUserName } from "@flowsvc/core";
import { addUserWithToken } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";
import { parsedOr400 } from "../errors.js";

/** `{name, role}`: the name's rule is core's (members.ts), as the members routes take it. */
const UserBody = z.strictObject({
  name: z
    .string()
    .meta({ ...USER_NAME_JSON_SCHEMA })
    .describe("the new user's name: ASCII letters, digits, . _ @ + -, starting with a letter or digit, at most 100"),
  role: z.enum(ROLES, { error: `must be one of ${ROLES.join(", ")}` }),
});

const NewUser = z.object({
  user: z.string(),
  role: z.enum(ROLES),
  token: z.string().describe("the user's first API token: shown this once, only its digest is stored"),
  token_id: z.string(),
});

const addDoc = api({
  summary: "Add a user with a role on the project and their first API token (shown once)",
  description: "A user of that name already exists: 409, nothing written (give them a role with PUT .../members/{user}).",
  tag: "members",
  auth: "admin",
  body: UserBody,
  response: { status: 201, schema: NewUser },
  errors: [409],
});

export const userRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const { pool } = deps;
  app.post("/api/v1/orgs/:org/projects/:project/users", addDoc, async (req, reply) => {
    const scope = await authorize(pool, req, "admin");
    const { name, role } = parsedOr400(UserBody, req.body ?? {}, "body");
    assertUserName(name);
    const r = await addUserWithToken(pool, { project: scope, name, role, label: `created by ${scope.caller.userName} for ${name}` });
    req.log.info({ project: scope.projectId, user: name, role, token_id: r.token.id, caller: scope.caller.userName }, "user added");
    const answer: z.infer<typeof NewUser> = { user: r.user, role: r.role, token: r.token.token, token_id: r.token.id };
    return reply.status(201).send(answer);
  });
  done();
};
