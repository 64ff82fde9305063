/**
 * The Connections page (issue 12, item 5): connected accounts, their statuses, connect, reconnect,
 * disable and remove. The accounts routes (`GET {scoped}/accounts`, `POST {scoped}/accounts/connect`,
 * `POST {scoped}/accounts/<name>/disable`, `DELETE {scoped}/accounts/<name>`, `GET /oauth/callback`) belong to the accounts work (branch
 * s4-accounts): the page offers them only when this server has them (app.hasRoute), and the rules
 * (PKCE, the state bound to the browser, who may remove) stay in those routes.
 *
 * The console does not pass its own session id as the state's binding: its cookie is
 * SameSite=Strict, so the provider's redirect back (a cross-site navigation) would not carry it.
 * The connect route's own httpOnly, SameSite=Lax cookie scoped to /oauth/callback is passed on to
 * the browser instead. The page then links to the provider (the CSP's form-action 'self' forbids a
 * form's redirect to another origin).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { CONSOLE_SESSION_HEADER } from "../auth.js";
import { ApiRefusal, callApi } from "./api.js";
import { csrfField, h, type Html } from "./html.js";
import { pbase, table, when, type Scoped } from "./pages.js";
import type { Flash } from "./flash.js";

export const ACCOUNTS_ROUTE = "/api/v1/orgs/:org/projects/:project/accounts";

export const accountsAvailable = (app: FastifyInstance): boolean =>
  app.hasRoute({ method: "GET", url: ACCOUNTS_ROUTE }) && app.hasRoute({ method: "POST", url: `${ACCOUNTS_ROUTE}/connect` });

export interface Account {
  name: string;
  provider: string;
  far_id?: string | null;
  far_label?: string | null;
  status: string;
  granter?: string | null;
  connected_at?: string | null;
}

const connectForm = (s: Scoped, o: { name?: string; provider?: string; label: string }): Html =>
  h`<form method="post" action="${pbase(s)}/connections/connect" class="inline">${csrfField(s.csrf)}${
    o.name
      ? h`<input type="hidden" name="name" value="${o.name}"><input type="hidden" name="provider" value="${o.provider ?? ""}">`
      : h`<label for="c-name">Name</label> <input id="c-name" name="name" required maxlength="128"> <label for="c-provider">Provider</label> <input id="c-provider" name="provider" required maxlength="64">`
  } <button type="submit">${o.label}</button></form>`;

/** Disable (switch off until a reconnect) or remove: a CSRF-protected POST to the page's own route, which calls the accounts route. */
const manageForm = (s: Scoped, name: string, op: "disable" | "remove"): Html =>
  h` <form method="post" action="${pbase(s)}/connections/${encodeURIComponent(name)}/${op}" class="inline">${csrfField(s.csrf)}<button type="submit">${op === "disable" ? "Disable" : "Remove"}</button></form>`;

const flashNote = (f: Flash | undefined): Html =>
  f === undefined ? h`` : h`<p class="${f.ok ? "flash" : "error"}" role="${f.ok ? "status" : "alert"}" id="flash">${f.text}</p>`;

export const connectionsPage = (
  s: Scoped,
  accounts: Account[] | undefined,
  o: { flash?: Flash | undefined; readOnly?: boolean } = {},
): Html => {
  if (!accounts) return h`<p>Connected accounts are not available on this server.</p>`;
  const { flash, readOnly = false } = o;
  const rows = accounts.map((a) => [
    a.name,
    a.provider,
    a.far_label ?? a.far_id ?? "",
    h`<span class="status status-${a.status}">${a.status}</span>`,
    a.granter ?? "",
    when(a.connected_at),
    readOnly
      ? "–"
      : h`${connectForm(s, { name: a.name, provider: a.provider, label: "Reconnect" })}${a.status === "disabled" ? "" : manageForm(s, a.name, "disable")} ${manageForm(s, a.name, "remove")}`,
  ]);
  return h`${flashNote(flash)}<p>Connecting is a browser flow: you are sent to the provider to grant access, then back here. No token is ever shown.</p>
${table({ caption: "Connected accounts", cols: ["Name", "Provider", "Account", "Status", "Granted by", "Connected", "Manage"], rows })}
${
  readOnly
    ? h`<p class="note" id="read-only">You are a viewer of this project: connecting, reconnecting, disabling and removing an account need the member role.</p>`
    : h`<h2>Connect an account</h2>${connectForm(s, { label: "Connect" })}`
}`;
};

const ConnectForm = z.object({ name: z.string().max(256).default(""), provider: z.string().max(256).default("") });

/** Starts a connect through the accounts route and answers the page that links to the provider. */
export const startConnect = async (
  app: FastifyInstance,
  o: { req: FastifyRequest; reply: FastifyReply; session: string; api: string; form: Record<string, string> },
): Promise<{ url: string }> => {
  const res = await app.inject({
    method: "POST",
    url: `${o.api}/accounts/connect`,
    headers: { [CONSOLE_SESSION_HEADER]: o.session },
    payload: ConnectForm.parse(o.form),
  });
  if (res.statusCode >= 400) {
    const e = (JSON.parse(res.body) as { error?: { message?: string } }).error;
    throw new ApiRefusal(res.statusCode, e?.message ?? res.body);
  }
  const cookie = res.headers["set-cookie"];
  if (cookie) void o.reply.header("set-cookie", cookie);
  return { url: (JSON.parse(res.body) as { authorize_url: string }).authorize_url };
};

export const listConnections = (app: FastifyInstance, session: string, api: string): Promise<Account[]> =>
  callApi<Account[]>(app, session, { url: `${api}/accounts` });
