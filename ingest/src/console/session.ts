import { randomBytes, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Pool } from "pg";
import { createConsoleSession, deleteConsoleSession, digestToken, findConsoleSession } from "@flowsvc/store";

export const SESSION_COOKIE = "flowsvc_session";
/** Before login there is no session: the login form's CSRF token is double-submitted (cookie and field). */
export const LOGIN_COOKIE = "flowsvc_login";
export const SESSION_TTL_SECS = 12 * 3600;

/** Every value this console sets in a cookie: 32 random bytes, base64url. Anything else is ignored. */
const RANDOM_VALUE = /^[A-Za-z0-9_-]{43}$/;

export const randomValue = (): string => randomBytes(32).toString("base64url");

/**
 * A cookie this console set, read from the Cookie header: undefined unless it appears once and has
 * exactly the shape the console writes (`shape`), so an oversized, repeated or control-character
 * cookie is nothing.
 */
export const cookieShaped = (req: FastifyRequest, name: string, shape: RegExp): string | undefined => {
  const header = req.headers.cookie;
  if (typeof header !== "string" || header.length > 8192) return undefined;
  const found = header
    .split(";")
    .map((c) => c.trim())
    .filter((c) => c.startsWith(`${name}=`))
    .map((c) => c.slice(name.length + 1));
  return found.length === 1 && shape.test(found[0]!) ? found[0] : undefined;
};

/** A cookie holding one of the console's random values (a session id, a CSRF token). */
export const cookieOf = (req: FastifyRequest, name: string): string | undefined => cookieShaped(req, name, RANDOM_VALUE);

export const sameSecret = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** Secure when the console is reached over https (FLOWSVC_PUBLIC_URL), so plain-http localhost still logs in. */
export const cookie = (o: { name: string; value: string; maxAge: number; secure: boolean }): string =>
  `${o.name}=${o.value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${o.maxAge}${o.secure ? "; Secure" : ""}`;

export interface Session {
  /** The raw session id: the console's internal API requests carry it (auth.ts). */
  id: string;
  csrf: string;
}

/** The request's live session, or undefined. */
export const sessionOf = async (pool: Pool, req: FastifyRequest): Promise<Session | undefined> => {
  const id = cookieOf(req, SESSION_COOKIE);
  if (!id) return undefined;
  const s = await findConsoleSession(pool, digestToken(id));
  return s ? { id, csrf: s.csrf } : undefined;
};

/** A session for an API token, or undefined when the token is not one of this server's. */
export const openSession = async (pool: Pool, token: string): Promise<Session | undefined> => {
  const id = randomValue();
  const csrf = randomValue();
  const ok = await createConsoleSession(pool, {
    digest: digestToken(id),
    tokenDigest: digestToken(token),
    csrf,
    ttlSecs: SESSION_TTL_SECS,
  });
  return ok ? { id, csrf } : undefined;
};

export const closeSession = (pool: Pool, s: Session): Promise<void> => deleteConsoleSession(pool, digestToken(s.id));

export const redirect = (reply: FastifyReply, to: string): FastifyReply => reply.code(303).header("location", to).send();
