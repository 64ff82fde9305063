import { z } from "zod";
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest } from "fastify";
import { isTerminalStatus } from "@flowsvc/core";
import type { RunView } from "@flowsvc/store";
import type { RouteDeps } from "../deps.js";
import { ApiRefusal, apiBase, callApi } from "./api.js";
import { accountsAvailable, connectionsPage, listConnections, startConnect } from "./connections.js";
import { clearFlashCookie, connectReturnCookie, flashOf } from "./flash.js";
import { answerOf, gatesPanel, type GateError, type GateList } from "./approvals.js";
import { CLIENT_CSS, CLIENT_JS } from "./assets.js";
import { LOG_LINE_MAX, LogEventsFrom, streamLogEvents } from "./log-events.js";
import { CSP, csrfField, h, page, text, type Html } from "./html.js";
import {
  errorPage,
  loginPage,
  pbase,
  projectsPage,
  runPage,
  runsPage,
  table,
  when,
  type JournalRow,
  type NodeRow,
  type Scoped,
} from "./pages.js";
import {
  LOGIN_COOKIE,
  SESSION_COOKIE,
  SESSION_TTL_SECS,
  closeSession,
  cookie,
  cookieOf,
  openSession,
  randomValue,
  redirect,
  sameSecret,
  sessionOf,
  type Session,
} from "./session.js";

const FORM_LIMIT = 64 * 1024;

const ScopeParams = z.object({ org: z.string().min(1).max(128), project: z.string().min(1).max(128) });
const RunParams = ScopeParams.extend({ id: z.string().min(1).max(64) });
const NameParams = ScopeParams.extend({ name: z.string().min(1).max(256) });
const Form = z.record(z.string(), z.string());
const RunsQuery = z.object({
  status: z.string().max(32).optional(),
  tag: z.string().max(128).optional(),
  handler: z.string().max(128).optional(),
});
/** A window of the log as the page asks for it: only these keys go on to the API, which checks their values. */
const LogWindow = z.object({
  from: z.string().max(32).optional(),
  limit: z.string().max(32).optional(),
  tail: z.string().max(32).optional(),
});

/** A token as a person pastes it: printable ASCII, no whitespace inside. */
const tokenProblem = (token: string | undefined): string | undefined => {
  if (!token || token.trim() === "") return "token: required";
  if (token.length > 512) return "token: longer than 512 characters; paste the API token only";
  if (!/^[\x21-\x7e]+$/.test(token.trim()))
    return "token: only printable characters without spaces (a control character, NUL or line break was sent)";
  return undefined;
};

const secureCookies = (deps: RouteDeps): boolean => deps.publicUrl?.startsWith("https:") ?? false;

const send = (reply: FastifyReply, status: number, html: string): FastifyReply =>
  reply
    .code(status)
    .header("content-type", "text/html; charset=utf-8")
    .header("content-security-policy", CSP)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header("cache-control", "no-store")
    .send(html);

const formOf = (req: FastifyRequest): Record<string, string> => Form.catch({}).parse(req.body ?? {});

/** The console's form parser: application/x-www-form-urlencoded, first value of each key. */
const parseForm = (_req: FastifyRequest, body: string, done: (err: Error | null, value?: unknown) => void): void => {
  const out: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(body)) if (!(k in out)) out[k] = v;
  done(null, out);
};

interface Ctx {
  app: FastifyInstance;
  deps: RouteDeps;
}

/** A page handler with its session; a missing session goes to /login, an API refusal becomes an error page. */
type PageHandler = (req: FastifyRequest, reply: FastifyReply, session: Session) => Promise<FastifyReply | string>;

/**
 * A page asked for without a session. The session cookie is SameSite=Strict: a GET that came from
 * another site (a provider's redirect back after a connect, a link in chat) arrives without it, so
 * the page loads the same URL again from here, a same-site navigation that carries it; a browser
 * with no session then goes to /login. A POST without one is refused.
 */
const noSession = (req: FastifyRequest, reply: FastifyReply): FastifyReply => {
  if (req.method !== "GET") return send(reply, 401, page({ title: "Logged out", body: errorPage("the session has ended; log in again") }));
  if (req.headers["sec-fetch-site"] === "cross-site")
    return send(
      reply,
      200,
      page({ title: "Loading", body: h`<meta http-equiv="refresh" content="0"><p><a href="${req.url}">Continue</a></p>` }),
    );
  return redirect(reply, "/login");
};

const withSession =
  (ctx: Ctx, handler: PageHandler, opts: { post?: boolean } = {}) =>
  async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const session = await sessionOf(ctx.deps.pool, req);
    if (!session) return noSession(req, reply);
    if (opts.post && !sameSecret(formOf(req).csrf ?? "", session.csrf))
      return send(
        reply,
        403,
        page({ title: "Refused", body: errorPage("the form's CSRF token does not match this session; reload the page and try again") }),
      );
    try {
      const out = await handler(req, reply, session);
      return typeof out === "string" ? send(reply, 200, out) : out;
    } catch (err) {
      if (!(err instanceof ApiRefusal)) throw err;
      if (err.status === 401) return redirect(reply, "/login");
      return send(reply, err.status, page({ title: "Refused", csrf: session.csrf, body: errorPage(err.message) }));
    }
  };

const scoped = (req: FastifyRequest, session: Session): Scoped & { api: string } => {
  const { org, project } = ScopeParams.parse(req.params);
  return { org, project, csrf: session.csrf, api: apiBase(org, project) };
};

const loginRoutes = (app: FastifyInstance, deps: RouteDeps): void => {
  const showLogin = (reply: FastifyReply, status: number, error?: string): FastifyReply => {
    const loginCsrf = randomValue();
    reply.header("set-cookie", cookie({ name: LOGIN_COOKIE, value: loginCsrf, maxAge: 3600, secure: secureCookies(deps) }));
    return send(reply, status, page({ title: "Log in", body: loginPage({ loginCsrf, ...(error ? { error } : {}) }) }));
  };
  app.get("/login", (_req, reply) => showLogin(reply, 200));
  app.post("/login", async (req, reply) => {
    const form = formOf(req);
    const expected = cookieOf(req, LOGIN_COOKIE);
    if (!expected || !sameSecret(form.csrf ?? "", expected))
      return showLogin(reply, 403, "the login form expired or was not sent by this page; try again");
    const problem = tokenProblem(form.token);
    if (problem) return showLogin(reply, 400, problem);
    const session = await openSession(deps.pool, form.token!.trim());
    if (!session) return showLogin(reply, 401, "the API token is not valid for this server");
    reply.header("set-cookie", [
      cookie({ name: SESSION_COOKIE, value: session.id, maxAge: SESSION_TTL_SECS, secure: secureCookies(deps) }),
      cookie({ name: LOGIN_COOKIE, value: "", maxAge: 0, secure: secureCookies(deps) }),
    ]);
    return redirect(reply, "/");
  });
  app.post(
    "/logout",
    withSession(
      { app, deps },
      async (_req, reply, session) => {
        await closeSession(deps.pool, session);
        reply.header("set-cookie", cookie({ name: SESSION_COOKIE, value: "", maxAge: 0, secure: secureCookies(deps) }));
        return redirect(reply, "/login");
      },
      { post: true },
    ),
  );
};

const runPages = (ctx: Ctx): void => {
  const { app } = ctx;
  app.get(
    "/",
    withSession(ctx, async (_req, _reply, session) => {
      const who = await callApi<{ user: string; projects: Array<{ org: string; project: string; role: string }> }>(app, session.id, {
        url: "/api/v1/whoami",
      });
      return page({ title: "Projects", csrf: session.csrf, body: projectsPage(who) });
    }),
  );
  const listRuns = (req: FastifyRequest, session: Session): Promise<RunView[]> => {
    const s = scoped(req, session);
    const q = new URLSearchParams(
      Object.entries(RunsQuery.parse(req.query)).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ""),
    );
    return callApi<RunView[]>(app, session.id, { url: `${s.api}/runs?${q.toString()}` });
  };
  app.get(
    "/p/:org/:project/runs",
    withSession(ctx, async (req, _reply, session) => {
      const s = scoped(req, session);
      const f = RunsQuery.parse(req.query);
      const runs = await listRuns(req, session);
      const qs = req.url.includes("?") ? req.url.slice(req.url.indexOf("?")) : "";
      return page({ title: "Runs", scope: s, csrf: s.csrf, body: runsPage(s, f, runs, `${pbase(s)}/runs.json${qs}`) });
    }),
  );
  app.get(
    "/p/:org/:project/runs.json",
    withSession(ctx, async (req, reply, session) =>
      reply.send((await listRuns(req, session)).map((r) => ({ id: r.id, status: r.status }))),
    ),
  );
  app.get(
    "/p/:org/:project/runs/:id",
    withSession(ctx, async (req, _reply, session) => showRun(ctx, req, session)),
  );
  app.post(
    "/p/:org/:project/runs/:id/approvals/:gate",
    withSession(ctx, async (req, reply, session) => answerGate(ctx, { req, reply, session }), { post: true }),
  );
  const runAction = (action: "cancel" | "rerun") =>
    withSession(
      ctx,
      async (req, reply, session) => {
        const s = scoped(req, session);
        const { id } = RunParams.parse(req.params);
        const body = action === "rerun" ? { from: formOf(req).from ?? "" } : {};
        const run = await callApi<RunView>(app, session.id, {
          method: "POST",
          url: `${s.api}/runs/${encodeURIComponent(id)}/${action}`,
          body,
        });
        return redirect(reply, `${pbase(s)}/runs/${encodeURIComponent(run.id)}`);
      },
      { post: true },
    );
  app.post("/p/:org/:project/runs/:id/cancel", runAction("cancel"));
  app.post("/p/:org/:project/runs/:id/rerun", runAction("rerun"));
};

/**
 * What the run page's script reads: windows of the log by line (the API's `log/lines`, in process),
 * and the live log and status as Server-Sent Events (log-events.ts).
 */
const liveRoutes = (ctx: Ctx): void => {
  const { app } = ctx;
  app.get(
    "/p/:org/:project/runs/:id/log.json",
    withSession(ctx, async (req, reply, session) => {
      const s = scoped(req, session);
      const { id } = RunParams.parse(req.params);
      const q = new URLSearchParams(Object.entries(LogWindow.parse(req.query)).filter((e): e is [string, string] => e[1] !== undefined));
      q.set("line_max", String(LOG_LINE_MAX));
      const w = await callApi<unknown>(app, session.id, { url: `${s.api}/runs/${encodeURIComponent(id)}/log/lines?${q.toString()}` });
      return reply.header("cache-control", "no-store").send(w);
    }),
  );
  // The live log: the run is read through the API first, so its rule (role, project) decides.
  app.get(
    "/p/:org/:project/runs/:id/log.events",
    withSession(ctx, async (req, reply, session) => {
      const s = scoped(req, session);
      const { id } = RunParams.parse(req.params);
      const lastId = req.headers["last-event-id"];
      const { after } = LogEventsFrom.parse(lastId === undefined ? req.query : { after: lastId });
      const run = await callApi<RunView>(app, session.id, { url: `${s.api}/runs/${encodeURIComponent(id)}` });
      return reply
        .header("content-type", "text/event-stream; charset=utf-8")
        .header("cache-control", "no-store")
        .header("x-content-type-options", "nosniff")
        .header("x-accel-buffering", "no")
        .send(
          streamLogEvents(ctx.deps, {
            runId: run.id,
            after,
            client: req.raw,
            allowed: async () => (await sessionOf(ctx.deps.pool, req)) !== undefined,
          }),
        );
    }),
  );
};

/** The run page; `gateError` re-shows a refused approval at its gate. */
const showRun = async (ctx: Ctx, req: FastifyRequest, session: Session, gateError?: GateError): Promise<string> => {
  const s = scoped(req, session);
  const { id } = RunParams.parse(req.params);
  const runApi = `${s.api}/runs/${encodeURIComponent(id)}`;
  const [run, steps, who] = await Promise.all([
    callApi<RunPageRun>(ctx.app, session.id, { url: runApi }),
    callApi<JournalRow[]>(ctx.app, session.id, { url: `${runApi}/steps` }),
    callApi<{ projects: Array<{ org: string; project: string; role: string }> }>(ctx.app, session.id, { url: "/api/v1/whoami" }),
  ]);
  // A viewer is offered nothing that changes the run (the API would refuse it: `this needs the member role`).
  const readOnly = who.projects.some((p) => p.org === s.org && p.project === s.project && p.role === "viewer");
  const gates = !isTerminalStatus(run.status) ? (await callApi<GateList>(ctx.app, session.id, { url: `${runApi}/approvals` })).gates : [];
  const panel = gates.length ? gatesPanel(s, run.id, gates, { error: gateError, readOnly }) : undefined;
  return page({
    title: `Run ${run.id}`,
    scope: s,
    csrf: s.csrf,
    body: runPage(s, { run, steps, readOnly, ...(panel ? { gates: panel } : {}) }),
  });
};

const GateParams = RunParams.extend({ gate: z.string().min(1).max(64) });

/** An approval answered through the approvals route; a refusal is shown inline at its gate (400). */
const answerGate = async (ctx: Ctx, o: { req: FastifyRequest; reply: FastifyReply; session: Session }): Promise<FastifyReply> => {
  const s = scoped(o.req, o.session);
  const { id, gate } = GateParams.parse(o.req.params);
  const form = formOf(o.req);
  const answer = answerOf(form);
  const url = `${s.api}/runs/${encodeURIComponent(id)}/approvals/${encodeURIComponent(gate)}`;
  try {
    await callApi(ctx.app, o.session.id, { method: "POST", url, body: answer });
  } catch (err) {
    if (!(err instanceof ApiRefusal) || err.status !== 400) throw err;
    return send(o.reply, 400, await showRun(ctx, o.req, o.session, { gate, message: err.message, values: answer.fields }));
  }
  return redirect(o.reply, `${pbase(s)}/runs/${encodeURIComponent(id)}`);
};

type RunPageRun = RunView & { activities: Array<{ name: string; status: string; exit_code: number | null }>; nodes?: NodeRow[] };

const readPage = (
  ctx: Ctx,
  o: { path: string; title: string; render: (s: Scoped, data: unknown) => Html; api: (s: { api: string }, req: FastifyRequest) => string },
): void => {
  ctx.app.get(
    `/p/:org/:project/${o.path}`,
    withSession(ctx, async (req, _reply, session) => {
      const s = scoped(req, session);
      const data = await callApi<unknown>(ctx.app, session.id, { url: o.api(s, req) });
      return page({ title: o.title, scope: s, csrf: s.csrf, body: o.render(s, data) });
    }),
  );
};

type Row = Record<string, unknown>;
const json = (v: unknown): Html => h`<pre class="json">${JSON.stringify(v, null, 2)}</pre>`;

const catalogPages = (ctx: Ctx): void => {
  readPage(ctx, {
    path: "events",
    title: "Events",
    api: (s) => `${s.api}/events?limit=200`,
    render: (s, d) =>
      table({
        caption: "Events, newest first",
        cols: ["Event", "Type", "Key", "Received"],
        rows: (d as Row[]).map((e) => [
          h`<a href="${pbase(s)}/events/${String(e.id)}">${String(e.id)}</a>`,
          String(e.type),
          text(e.key),
          when(e.created_at as string),
        ]),
      }),
  });
  ctx.app.get(
    "/p/:org/:project/events/:name",
    withSession(ctx, async (req, _reply, session) => {
      const s = scoped(req, session);
      const { name } = NameParams.parse(req.params);
      const e = await callApi<Row>(ctx.app, session.id, { url: `${s.api}/events/${encodeURIComponent(name)}` });
      return page({ title: `Event ${name}`, scope: s, csrf: s.csrf, body: json(e) });
    }),
  );
  readPage(ctx, {
    path: "catalog",
    title: "Event catalog",
    api: (s) => `${s.api}/events/catalog`,
    render: (_s, d) => {
      const c = d as { platform: Row[]; seen: Row[] };
      return h`${table({ caption: "Platform events", cols: ["Type", "Description"], rows: c.platform.map((t) => [String(t.type), String(t.description)]) })}
${table({ caption: "Seen in this project", cols: ["Type", "Sample payload"], rows: c.seen.map((t) => [String(t.type), json(t.sample_payload)]) })}`;
    },
  });
  readPage(ctx, {
    path: "handlers",
    title: "Handlers",
    api: (s) => `${s.api}/handlers`,
    render: (s, d) =>
      table({
        caption: "Handlers",
        cols: ["Handler", "Runs", "Definition"],
        rows: (d as Row[]).map((x) => [
          String(x.name),
          h`<a href="${pbase(s)}/runs?handler=${encodeURIComponent(String(x.name))}">runs</a>`,
          json(x),
        ]),
      }),
  });
  readPage(ctx, {
    path: "hooks",
    title: "Event hooks",
    api: (s) => `${s.api}/event-hooks`,
    render: (_s, d) =>
      table({ caption: "Event hooks", cols: ["Hook", "Definition"], rows: (d as Row[]).map((x) => [String(x.name), json(x)]) }),
  });
};

const secretRow = (s: Scoped, kind: "secrets" | "credentials", admin: boolean, x: Row): Array<Html | string> => {
  const name = String(x.name);
  const action = `${pbase(s)}/${kind}/${encodeURIComponent(name)}`;
  const replace =
    kind === "secrets"
      ? h`<form method="post" action="${action}/replace" class="inline">${csrfField(s.csrf)}<label>New value <input type="password" name="value" autocomplete="off" required></label> <button type="submit">Replace</button></form>`
      : "";
  const del = h`<form method="post" action="${action}/delete" class="inline">${csrfField(s.csrf)}<button type="submit">Delete</button></form>`;
  return [name, kind === "credentials" ? text(x.kind) : "secret", when(x.set_at as string), admin ? h`${replace} ${del}` : "–"];
};

const secretPages = (ctx: Ctx): void => {
  const { app } = ctx;
  app.get(
    "/p/:org/:project/secrets",
    withSession(ctx, async (req, _reply, session) => {
      const s = scoped(req, session);
      const [secrets, credentials, who] = await Promise.all([
        callApi<Row[]>(app, session.id, { url: `${s.api}/secrets` }),
        callApi<Row[]>(app, session.id, { url: `${s.api}/credentials` }),
        callApi<{ projects: Array<{ org: string; project: string; role: string }> }>(app, session.id, { url: "/api/v1/whoami" }),
      ]);
      const admin = who.projects.some((p) => p.org === s.org && p.project === s.project && p.role === "admin");
      const body = h`<p>Names and set times only: no value is ever shown.${admin ? "" : " Only an admin can replace or delete."}</p>
${table({ caption: "Secrets and credentials", cols: ["Name", "Kind", "Set at", "Manage"], rows: [...secrets.map((x) => secretRow(s, "secrets", admin, x)), ...credentials.map((x) => secretRow(s, "credentials", admin, x))] })}`;
      return page({ title: "Secrets and credentials", scope: s, csrf: s.csrf, body });
    }),
  );
  const write = (kind: "secrets" | "credentials", op: "replace" | "delete") =>
    withSession(
      ctx,
      async (req, reply, session) => {
        const s = scoped(req, session);
        const { name } = NameParams.parse(req.params);
        const url = `${s.api}/${kind}/${encodeURIComponent(name)}`;
        if (op === "delete") await callApi(app, session.id, { method: "DELETE", url });
        else await callApi(app, session.id, { method: "PUT", url, body: { value: formOf(req).value ?? "" } });
        return redirect(reply, `${pbase(s)}/secrets`);
      },
      { post: true },
    );
  app.post("/p/:org/:project/secrets/:name/replace", write("secrets", "replace"));
  app.post("/p/:org/:project/secrets/:name/delete", write("secrets", "delete"));
  app.post("/p/:org/:project/credentials/:name/delete", write("credentials", "delete"));
};

const connectionPages = (ctx: Ctx): void => {
  const { app } = ctx;
  app.get(
    "/p/:org/:project/connections",
    withSession(ctx, async (req, reply, session) => {
      const s = scoped(req, session);
      const [accounts, who] = await Promise.all([
        accountsAvailable(app) ? listConnections(app, session.id, s.api) : undefined,
        callApi<{ projects: Array<{ org: string; project: string; role: string }> }>(app, session.id, { url: "/api/v1/whoami" }),
      ]);
      // A viewer is offered no form: the accounts route would refuse each (`this needs the member role`).
      const readOnly = who.projects.some((p) => p.org === s.org && p.project === s.project && p.role === "viewer");
      // The outcome of a connect the callback sent back here, shown once.
      const flash = flashOf(req);
      if (flash) void reply.header("set-cookie", clearFlashCookie(secureCookies(ctx.deps)));
      return page({ title: "Connections", scope: s, csrf: s.csrf, body: connectionsPage(s, accounts, { flash, readOnly }) });
    }),
  );
  app.post(
    "/p/:org/:project/connections/connect",
    withSession(
      ctx,
      async (req, reply, session) => {
        const s = scoped(req, session);
        if (!accountsAvailable(app))
          return send(
            reply,
            404,
            page({ title: "Not available", csrf: s.csrf, body: errorPage("connected accounts are not available on this server") }),
          );
        const { url } = await startConnect(app, { req, reply, session: session.id, api: s.api, form: formOf(req) });
        // The callback sends the browser back to this project's Connections page rather than answering JSON.
        void reply.header("set-cookie", connectReturnCookie(s, secureCookies(ctx.deps)));
        return page({
          title: "Connect",
          scope: s,
          csrf: s.csrf,
          body: h`<p><a href="${url}" id="continue">Continue to the provider</a> to grant access; you come back here afterwards.</p>`,
        });
      },
      { post: true },
    ),
  );
  // Remove (DELETE the account) or disable (switch it off until a reconnect): the accounts route decides who may.
  const manage = (op: "remove" | "disable") =>
    withSession(
      ctx,
      async (req, reply, session) => {
        const s = scoped(req, session);
        const { name } = NameParams.parse(req.params);
        if (!accountsAvailable(app))
          return send(
            reply,
            404,
            page({ title: "Not available", csrf: s.csrf, body: errorPage("connected accounts are not available on this server") }),
          );
        const url = `${s.api}/accounts/${encodeURIComponent(name)}`;
        await callApi(app, session.id, op === "remove" ? { method: "DELETE", url } : { method: "POST", url: `${url}/disable`, body: {} });
        return redirect(reply, `${pbase(s)}/connections`);
      },
      { post: true },
    );
  app.post("/p/:org/:project/connections/:name/remove", manage("remove"));
  app.post("/p/:org/:project/connections/:name/disable", manage("disable"));
};

/**
 * The web console at `/` (issue 12, item 5): server-rendered pages over the user API, one small
 * hand-written script and stylesheet served from here (no CDN, no inline script).
 */
export const consoleRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string", bodyLimit: FORM_LIMIT }, (req, body, next) =>
    parseForm(req, body as string, next),
  );
  const asset = (type: string, body: string) => (_req: FastifyRequest, reply: FastifyReply) =>
    reply
      .header("content-type", type)
      .header("cache-control", "public, max-age=300")
      .header("x-content-type-options", "nosniff")
      .send(body);
  app.get("/console/static/console.js", asset("text/javascript; charset=utf-8", CLIENT_JS));
  app.get("/console/static/console.css", asset("text/css; charset=utf-8", CLIENT_CSS));
  loginRoutes(app, deps);
  const ctx = { app, deps };
  runPages(ctx);
  liveRoutes(ctx);
  catalogPages(ctx);
  secretPages(ctx);
  connectionPages(ctx);
  done();
};
