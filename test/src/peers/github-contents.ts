/**
 * A protocol-faithful peer of GitHub's repository contents API (`GET /repos/{owner}/{repo}/contents/{path}`),
 * for a workflow node's `from_repo`. As GitHub does: no `User-Agent` is 403; no token is 401
 * "Requires authentication" (for a private repository GitHub answers 404, which the node reports
 * the same way: not read), a wrong one 401 "Bad credentials" (the token arrives as
 * `Authorization: Bearer` or `token`); an unknown repository, path or ref is 404 "Not Found";
 * `Accept: application/vnd.github.raw` answers the file's bytes, any other Accept the JSON object
 * with the content in base64. `?ref=` picks a branch (default `main`).
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { closeLoopback, listenLoopback } from "../support/loopback.js";

export interface ContentsRequest {
  path: string;
  headers: IncomingHttpHeaders;
}

const PATH = /^\/repos\/([^/]+)\/([^/]+)\/contents\/([^?]+)(?:\?(.*))?$/;
const DOCS = "https://docs.github.com/rest/repos/contents#get-repository-content";

export class GithubContentsPeer {
  /** Every request received, in order. */
  readonly requests: ContentsRequest[] = [];
  readonly #token: string;
  /** `owner/repo@ref:path` -> the file's text. */
  readonly #files = new Map<string, string>();
  #server: Server | undefined;
  #url = "";

  constructor(opts: { token: string }) {
    this.#token = opts.token;
  }

  get url(): string {
    return this.#url;
  }

  /** Puts a file in a repository at a ref. */
  file(repo: string, path: string, text: string, ref = "main"): this {
    this.#files.set(`${repo}@${ref}:${path}`, text);
    return this;
  }

  #answer(method: string, url: string, headers: IncomingHttpHeaders): { status: number; type: string; body: string } {
    const json = (status: number, body: unknown) => ({ status, type: "application/json; charset=utf-8", body: JSON.stringify(body) });
    if (headers["user-agent"] === undefined)
      return json(403, { message: "Request forbidden by administrative rules. Please make sure your request has a User-Agent header" });
    const auth = headers.authorization;
    if (auth === undefined) return json(401, { message: "Requires authentication", documentation_url: DOCS, status: "401" });
    const token = /^(?:Bearer|token) (.+)$/.exec(auth)?.[1];
    if (token !== this.#token) return json(401, { message: "Bad credentials", documentation_url: DOCS, status: "401" });
    const m = PATH.exec(url);
    if (method !== "GET" || !m) return json(404, { message: "Not Found", documentation_url: DOCS, status: "404" });
    const path = decodeURIComponent(m[3]!);
    const ref = new URLSearchParams(m[4] ?? "").get("ref") ?? "main";
    const text = this.#files.get(`${m[1]}/${m[2]}@${ref}:${path}`);
    if (text === undefined) return json(404, { message: "Not Found", documentation_url: DOCS, status: "404" });
    if (headers.accept === "application/vnd.github.raw") return { status: 200, type: "application/vnd.github.raw", body: text };
    const name = path.split("/").at(-1)!;
    return json(200, {
      type: "file",
      encoding: "base64",
      name,
      path,
      size: Buffer.byteLength(text),
      content: Buffer.from(text).toString("base64"),
    });
  }

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        this.requests.push({ path: req.url ?? "", headers: req.headers });
        const a = this.#answer(req.method ?? "", req.url ?? "", req.headers);
        res.writeHead(a.status, { "content-type": a.type });
        res.end(a.body);
      });
    });
    this.#url = `http://127.0.0.1:${await listenLoopback(server)}`;
    this.#server = server;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server) await closeLoopback(server);
  }
}
