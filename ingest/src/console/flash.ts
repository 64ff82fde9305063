/**
 * The way back to the console after a connect (issue 12, item 5). A connect started on the
 * Connections page sets `flowsvc_oauth_return` (path /oauth/callback, httpOnly, SameSite=Lax: the
 * provider's redirect back is a cross-site top-level GET) naming the project; the callback then
 * answers a 303 to that project's Connections page with the outcome in a one-time flash cookie
 * (`flowsvc_flash`, path /p/, read and cleared by the page) instead of its JSON, which API callers
 * (no such cookie) still get. The location is always built here from the two names, encoded: the
 * cookie cannot send the browser anywhere else.
 */
import type { FastifyRequest } from "fastify";
import { cookieShaped } from "./session.js";

export const CONNECT_RETURN_COOKIE = "flowsvc_oauth_return";
export const FLASH_COOKIE = "flowsvc_flash";
/** The return cookie lives as long as a connect's state (store's OAUTH_STATE_TTL_SECS). */
const RETURN_TTL_SECS = 600;
const FLASH_TTL_SECS = 120;
const FLASH_TEXT_MAX = 1000;
/** An org or project name as the console's routes take it: 1 to 128 characters, none of them a control character. */
const nameOk = (x: unknown): x is string =>
  typeof x === "string" && x.length >= 1 && x.length <= 128 && [...x].every((c) => c.charCodeAt(0) >= 0x20 && c !== "\x7f");

export interface Flash {
  ok: boolean;
  text: string;
}

/** One cookie's raw value (base64url, at most `max` characters) from the Cookie header; undefined when absent, repeated or another shape. */
const rawCookie = (req: FastifyRequest, name: string, max: number): string | undefined =>
  cookieShaped(req, name, new RegExp(`^[A-Za-z0-9_-]{0,${max}}$`));

const decoded = (value: string): unknown => {
  try {
    return JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
};

const setCookie = (o: { name: string; value: string; path: string; maxAge: number; secure: boolean }): string =>
  `${o.name}=${o.value}; Path=${o.path}; Max-Age=${o.maxAge}; HttpOnly; SameSite=Lax${o.secure ? "; Secure" : ""}`;

/** Set by the console's connect: the callback should send the browser back to this project's Connections page. */
export const connectReturnCookie = (scope: { org: string; project: string }, secure: boolean): string =>
  setCookie({
    name: CONNECT_RETURN_COOKIE,
    value: Buffer.from(JSON.stringify([scope.org, scope.project])).toString("base64url"),
    path: "/oauth/callback",
    maxAge: RETURN_TTL_SECS,
    secure,
  });

/** The Connections page the callback answers a 303 to, when the connect started on the console. */
export const consoleReturnOf = (req: FastifyRequest): string | undefined => {
  const raw = rawCookie(req, CONNECT_RETURN_COOKIE, 1024);
  const v = raw === undefined ? undefined : decoded(raw);
  if (!Array.isArray(v) || v.length !== 2 || !v.every(nameOk)) return undefined;
  const [org, project] = v as [string, string];
  return `/p/${encodeURIComponent(org)}/${encodeURIComponent(project)}/connections`;
};

/** The callback's cookies on its way back: the flash for the page, and the return cookie cleared. */
export const flashCookies = (flash: Flash, secure: boolean): string[] => [
  setCookie({
    name: FLASH_COOKIE,
    value: Buffer.from(JSON.stringify({ ok: flash.ok, text: flash.text.slice(0, FLASH_TEXT_MAX) })).toString("base64url"),
    path: "/p/",
    maxAge: FLASH_TTL_SECS,
    secure,
  }),
  setCookie({ name: CONNECT_RETURN_COOKIE, value: "", path: "/oauth/callback", maxAge: 0, secure }),
];

/** The flash a page shows once (then clearFlashCookie), or undefined. */
export const flashOf = (req: FastifyRequest): Flash | undefined => {
  const raw = rawCookie(req, FLASH_COOKIE, 4096);
  const v = raw === undefined ? undefined : decoded(raw);
  if (v === null || typeof v !== "object") return undefined;
  const { ok, text } = v as { ok?: unknown; text?: unknown };
  return typeof ok === "boolean" && typeof text === "string" ? { ok, text: text.slice(0, FLASH_TEXT_MAX) } : undefined;
};

export const clearFlashCookie = (secure: boolean): string => setCookie({ name: FLASH_COOKIE, value: "", path: "/p/", maxAge: 0, secure });
