/**
 * A protocol-faithful OAuth 2 provider on 127.0.0.1 for connected-account tests (RFC 6749, PKCE
 * RFC 7636 S256 only, revocation RFC 7009): an authorize endpoint that redirects with `code` and
 * `state` as the signed-in user, a token endpoint (authorization_code with the PKCE check,
 * refresh_token with optional rotation and family revocation on reuse), an identity endpoint and a
 * revoke endpoint. Faults are queued per endpoint: answers held until released, error answers, and a connection dropped
 * after the request was read (before or after the provider acted on it). It counts what it was
 * sent, so a test can assert that no refresh token was ever presented twice.
 */
import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { closeLoopback, listenLoopback } from "../support/loopback.js";

export interface PeerUser {
  id: number;
  login: string;
}

export type TokenFault =
  /** Read the request and answer it only once `releaseHeld()` is called (a slow provider: past the client's timeout, a timeout). */
  | { kind: "hold" }
  /** Answer this status with an OAuth error body (or plain text for 5xx). */
  | { kind: "status"; status: number; error?: string }
  /** Read the request, act on it (`applied`: a refresh rotates) or not, then drop the connection. */
  | { kind: "drop"; applied: boolean };

export interface OAuthPeerOptions {
  rotatesRefreshToken: boolean;
  reuseRevokesFamily: boolean;
  /** `expires_in` of each access token; undefined: omitted from the answer. */
  expiresIn?: number;
  clientId?: string;
  clientSecret?: string;
}

interface Grant {
  family: string;
  user: PeerUser;
  revoked: boolean;
}

interface Code {
  challenge: string;
  redirectUri: string;
  user: PeerUser;
  used: boolean;
}

const b64url = (b: Buffer): string => b.toString("base64url");
const rand = (prefix: string): string => `${prefix}_${b64url(randomBytes(18))}`;

export class OAuthProviderPeer {
  readonly opts: Required<Omit<OAuthPeerOptions, "expiresIn">> & { expiresIn: number | undefined };
  url = "";
  /** Who the next consent signs in as. */
  user: PeerUser = { id: 1001, login: "ann" };
  readonly tokenFaults: TokenFault[] = [];
  #held: Array<() => void> = [];
  /** The identity endpoint answers this status next (once), instead of the user. */
  identityFaults: number[] = [];
  /** Each refresh token, and how many times it was presented. */
  readonly presented = new Map<string, number>();
  /** Refresh requests the provider acted on (renewed tokens). */
  refreshesServed = 0;
  readonly revokedTokens: string[] = [];
  /** Every access token issued, in order (a test checks what reached a script). */
  readonly issuedAccess: string[] = [];
  /** Every bearer token presented at the identity endpoint (`GET /user`), in order. */
  readonly identityTokens: string[] = [];
  readonly #server = createServer((req, res) => void this.#handle(req, res));
  readonly #codes = new Map<string, Code>();
  readonly #grants = new Map<string, Grant>();
  /** refresh token -> family; `rotated` ones were replaced and may not be used again. */
  readonly #refresh = new Map<string, { family: string; rotated: boolean }>();
  readonly #access = new Map<string, string>();

  constructor(opts: OAuthPeerOptions) {
    this.opts = { clientId: "flowsvc-test-client", clientSecret: "peer-client-secret", expiresIn: undefined, ...opts };
  }

  async start(): Promise<this> {
    this.url = `http://127.0.0.1:${await listenLoopback(this.#server)}`;
    return this;
  }

  /** Lets every token request held by a `hold` fault go on (it is then answered as usual). */
  releaseHeld(): void {
    for (const go of this.#held.splice(0)) go();
  }

  async close(): Promise<void> {
    await closeLoopback(this.#server);
  }

  /** A provider object for FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS pointing here. */
  providerConfig(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      name,
      authorize_url: `${this.url}/authorize`,
      token_url: `${this.url}/token`,
      client_id: this.opts.clientId,
      client_secret: this.opts.clientSecret,
      scopes: ["repo", "read:user"],
      capabilities: { rotates_refresh_token: this.opts.rotatesRefreshToken, reuse_revokes_family: this.opts.reuseRevokesFamily },
      identity: { url: `${this.url}/user`, id_pointer: "/id", label_pointer: "/login" },
      revoke_url: `${this.url}/revoke`,
      ...extra,
    };
  }

  /** Mints a grant directly (as if a consent had happened): for tests that start from a connected account. */
  mintGrant(user: PeerUser = this.user): { access_token: string; refresh_token: string } {
    const family = rand("fam");
    this.#grants.set(family, { family, user, revoked: false });
    return this.#issue(family);
  }

  /** Whether the grant behind a refresh token still stands. */
  familyAlive(refreshToken: string): boolean {
    const r = this.#refresh.get(refreshToken);
    return r !== undefined && this.#grants.get(r.family)?.revoked === false;
  }

  /** Refresh tokens presented more than once. */
  presentedTwice(): string[] {
    return [...this.presented].filter(([, n]) => n > 1).map(([t]) => t);
  }

  #issue(family: string): { access_token: string; refresh_token: string } {
    const access_token = rand("at");
    const refresh_token = rand("rt");
    this.#access.set(access_token, family);
    this.issuedAccess.push(access_token);
    this.#refresh.set(refresh_token, { family, rotated: false });
    return { access_token, refresh_token };
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
    const url = new URL(req.url ?? "/", this.url);
    if (req.method === "GET" && url.pathname === "/authorize") return this.#authorize(url, res);
    if (req.method === "POST" && url.pathname === "/token") return this.#token(req, body, res);
    if (req.method === "GET" && url.pathname === "/user") return this.#identity(req, res);
    if (req.method === "POST" && url.pathname === "/revoke") return this.#revoke(req, body, res);
    res.writeHead(404).end();
  }

  #authorize(url: URL, res: ServerResponse): void {
    const q = url.searchParams;
    const redirect = q.get("redirect_uri");
    if (q.get("client_id") !== this.opts.clientId || !redirect) return void res.writeHead(400).end("bad client_id or redirect_uri");
    const back = new URL(redirect);
    const state = q.get("state");
    if (state !== null) back.searchParams.set("state", state);
    if (q.get("response_type") !== "code" || q.get("code_challenge_method") !== "S256" || !q.get("code_challenge")) {
      back.searchParams.set("error", "invalid_request");
      back.searchParams.set("error_description", "PKCE S256 is required");
    } else {
      const code = rand("code");
      this.#codes.set(code, { challenge: q.get("code_challenge")!, redirectUri: redirect, user: this.user, used: false });
      back.searchParams.set("code", code);
    }
    res.writeHead(302, { location: back.href }).end();
  }

  #clientOk(req: IncomingMessage, body: URLSearchParams): boolean {
    const basic = req.headers.authorization?.match(/^Basic (.+)$/)?.[1];
    const [id, secret] = basic
      ? Buffer.from(basic, "base64").toString().split(":").map(decodeURIComponent)
      : [body.get("client_id"), body.get("client_secret")];
    return id === this.opts.clientId && secret === this.opts.clientSecret;
  }

  #json(res: ServerResponse, status: number, value: unknown): void {
    res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" }).end(JSON.stringify(value));
  }

  #tokens(res: ServerResponse, t: { access_token: string; refresh_token: string }): void {
    this.#json(res, 200, { ...t, token_type: "Bearer", ...(this.opts.expiresIn !== undefined ? { expires_in: this.opts.expiresIn } : {}) });
  }

  async #token(req: IncomingMessage, body: URLSearchParams, res: ServerResponse): Promise<void> {
    const fault = this.tokenFaults.shift();
    if (fault?.kind === "hold") await new Promise<void>((r) => this.#held.push(r));
    if (fault?.kind === "status")
      return fault.status >= 500
        ? void res.writeHead(fault.status).end("upstream trouble")
        : this.#json(res, fault.status, { error: fault.error ?? "invalid_request" });
    if (!this.#clientOk(req, body)) return this.#json(res, 401, { error: "invalid_client" });
    const answer = body.get("grant_type") === "authorization_code" ? this.#codeGrant(body) : this.#refreshGrant(body, fault);
    if (fault?.kind === "drop") return void req.socket.destroy();
    if ("error" in answer) return this.#json(res, 400, answer);
    this.#tokens(res, answer);
  }

  #codeGrant(body: URLSearchParams): { access_token: string; refresh_token: string } | { error: string } {
    const code = this.#codes.get(body.get("code") ?? "");
    if (!code || code.used || code.redirectUri !== body.get("redirect_uri")) return { error: "invalid_grant" };
    code.used = true;
    const verifier = body.get("code_verifier") ?? "";
    if (b64url(createHash("sha256").update(verifier).digest()) !== code.challenge) return { error: "invalid_grant" };
    return this.mintGrant(code.user);
  }

  #refreshGrant(body: URLSearchParams, fault: TokenFault | undefined): { access_token: string; refresh_token: string } | { error: string } {
    if (body.get("grant_type") !== "refresh_token") return { error: "unsupported_grant_type" };
    const token = body.get("refresh_token") ?? "";
    this.presented.set(token, (this.presented.get(token) ?? 0) + 1);
    const r = this.#refresh.get(token);
    if (!r || !this.#usable(r)) return { error: "invalid_grant" };
    if (fault?.kind === "drop" && !fault.applied) return { error: "dropped" };
    this.refreshesServed++;
    if (!this.opts.rotatesRefreshToken) {
      const access_token = rand("at");
      this.#access.set(access_token, r.family);
      return { access_token, refresh_token: token };
    }
    r.rotated = true;
    return this.#issue(r.family);
  }

  /** A refresh token that may still buy tokens; presenting a rotated one revokes the family when configured. */
  #usable(r: { family: string; rotated: boolean }): boolean {
    const grant = this.#grants.get(r.family);
    if (!grant || grant.revoked) return false;
    if (r.rotated && this.opts.reuseRevokesFamily) grant.revoked = true;
    return !r.rotated;
  }

  #identity(req: IncomingMessage, res: ServerResponse): void {
    const fault = this.identityFaults.shift();
    if (fault !== undefined) return void res.writeHead(fault).end("identity trouble");
    const token = req.headers.authorization?.match(/^Bearer (.+)$/i)?.[1] ?? "";
    this.identityTokens.push(token);
    const grant = this.#grants.get(this.#access.get(token) ?? "");
    if (!grant || grant.revoked) return this.#json(res, 401, { message: "Bad credentials" });
    this.#json(res, 200, { id: grant.user.id, login: grant.user.login, type: "User" });
  }

  #revoke(req: IncomingMessage, body: URLSearchParams, res: ServerResponse): void {
    if (!this.#clientOk(req, body)) return this.#json(res, 401, { error: "invalid_client" });
    const token = body.get("token") ?? "";
    const family = this.#refresh.get(token)?.family ?? this.#access.get(token);
    const grant = family && this.#grants.get(family);
    if (grant) grant.revoked = true;
    this.revokedTokens.push(token);
    res.writeHead(200).end();
  }
}
