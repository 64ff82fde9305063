/**
 * A protocol-faithful peer of GitHub's commit statuses API (`POST /repos/{owner}/{repo}/statuses/{sha}`).
 * As GitHub does: no `User-Agent` is 403; no token is 401 "Requires authentication", a wrong one 401
 * "Bad credentials" (the token arrives as `Authorization: Bearer` or `token`); a sha that is not a
 * full commit id, or a `state` outside error/failure/pending/success, is 422 "Validation Failed";
 * a good call is 201 with the status object (`context` defaulting to "default").
 */
import { Peer, type PeerAnswer, type PeerRequest } from "./peer.js";

export const STATUS_STATES = ["error", "failure", "pending", "success"] as const;

export interface GithubStatus {
  owner: string;
  repo: string;
  sha: string;
  state: string;
  target_url: string | null;
  description: string | null;
  context: string;
}

const DOCS = "https://docs.github.com/rest/commits/statuses#create-a-commit-status";
const PATH = /^\/repos\/([^/]+)\/([^/]+)\/statuses\/([^/?]+)$/;

const invalid = (field: string, message: string): PeerAnswer => ({
  status: 422,
  body: {
    message: "Validation Failed",
    errors: [{ resource: "Status", code: "custom", field, message }],
    documentation_url: DOCS,
    status: "422",
  },
});

export class GithubStatusPeer extends Peer {
  readonly #token: string;
  /** Every status created. */
  readonly statuses: GithubStatus[] = [];

  constructor(opts: { token: string }) {
    super();
    this.#token = opts.token;
  }

  #authProblem(req: PeerRequest): PeerAnswer | undefined {
    if (req.headers["user-agent"] === undefined)
      return {
        status: 403,
        body: { message: "Request forbidden by administrative rules. Please make sure your request has a User-Agent header" },
      };
    const auth = req.headers["authorization"];
    if (auth === undefined) return { status: 401, body: { message: "Requires authentication", documentation_url: DOCS, status: "401" } };
    if (auth !== `Bearer ${this.#token}` && auth !== `token ${this.#token}`)
      return { status: 401, body: { message: "Bad credentials", documentation_url: "https://docs.github.com/rest", status: "401" } };
    return undefined;
  }

  protected handle(req: PeerRequest): PeerAnswer {
    const m = PATH.exec(req.path);
    if (req.method !== "POST" || !m) return { status: 404, body: { message: "Not Found", documentation_url: DOCS, status: "404" } };
    const refused = this.#authProblem(req);
    if (refused) return refused;
    const [owner, repo, sha] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!), decodeURIComponent(m[3]!)];
    if (!/^[0-9a-f]{40}$/i.test(sha)) return invalid("sha", `No commit found for SHA: ${sha}`);
    const body = (req.json ?? {}) as Record<string, unknown>;
    const state = body["state"];
    if (typeof state !== "string" || !(STATUS_STATES as readonly string[]).includes(state))
      return invalid("state", "state is not included in the list");
    const str = (k: string): string | null => {
      const v = body[k];
      return typeof v === "string" ? v : null;
    };
    const status: GithubStatus = {
      owner,
      repo,
      sha,
      state,
      target_url: str("target_url"),
      description: str("description"),
      context: str("context") ?? "default",
    };
    this.statuses.push(status);
    const id = this.statuses.length;
    const now = new Date().toISOString();
    return {
      status: 201,
      body: {
        url: `https://api.github.com/repos/${owner}/${repo}/statuses/${sha}`,
        id,
        node_id: `SC_${id}`,
        ...status,
        created_at: now,
        updated_at: now,
        creator: { login: "flowsvc-bot", id: 1, type: "Bot" },
      },
    };
  }
}
