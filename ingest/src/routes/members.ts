import { z } from "zod";
import type { FastifyPluginCallback, FastifyRequest } from "fastify";
import { ROLES, assertUserName } from "@flowsvc/core";
import { listMembers, removeMember, setMemberRole } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";
import { parsedOr400 } from "../errors.js";

const UserParams = z.object({ user: z.string() });
/** `{role}`; the role's rule is core's (members.ts), so the CLI's check and this one agree. */
const RoleBody = z.strictObject({ role: z.enum(ROLES, { error: `must be one of ${ROLES.join(", ")}` }) });

const userOf = (req: FastifyRequest): string => {
  const { user } = UserParams.parse(req.params);
  assertUserName(user);
  return user;
};

const listDoc = api({
  summary: "The project's members: user, role, and the connected accounts each granted here",
  tag: "members",
  auth: "admin",
});
const setDoc = api({
  summary: "Give a user a role on the project (adds them when they are no member yet); the last admin cannot be demoted",
  tag: "members",
  auth: "admin",
  params: UserParams,
  body: RoleBody,
  errors: [409],
});
const removeDoc = api({
  summary: "Remove a member; every connected account they granted here is disabled in the same transaction",
  description: "The last admin cannot be removed (409). The answer names the accounts disabled; no token or secret is read or published.",
  tag: "members",
  auth: "admin",
  params: UserParams,
  errors: [409],
});

/**
 * `{scoped}/members` (README "Roles"): an admin lists the project's members, sets a user's role and
 * removes a member. Users themselves (and their tokens) are made by routes/users.ts (`flow user add`). A member who leaves
 * takes the use of the accounts they granted with them (spec, "Connected account status"): store's
 * removeMember disables those accounts in the removal's own transaction.
 */
export const memberRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const { pool } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/members";

  app.get(base, listDoc, async (req) => {
    const scope = await authorize(pool, req, "admin");
    return listMembers(pool, scope.projectId);
  });

  app.put(`${base}/:user`, setDoc, async (req) => {
    const scope = await authorize(pool, req, "admin");
    const user = userOf(req);
    const { role } = parsedOr400(RoleBody, req.body ?? {}, "body");
    const r = await setMemberRole(pool, { project: scope, user, role });
    req.log.info({ project: scope.projectId, member: user, role: r.role, caller: scope.caller.userName }, "member role set");
    return r;
  });

  app.delete(`${base}/:user`, removeDoc, async (req) => {
    const scope = await authorize(pool, req, "admin");
    const user = userOf(req);
    const r = await removeMember(pool, { project: scope, user });
    req.log.info({ project: scope.projectId, member: user, disabled: r.disabled, caller: scope.caller.userName }, "member removed");
    return r;
  });
  done();
};
