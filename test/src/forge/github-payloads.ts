/**
 * GitHub webhook bodies, shaped as GitHub sends them (the fields flowsvc reads, and enough of the
 * rest that a handler sees a realistic document): push with commits, pull_request opened from a
 * fork or from the repository itself, issue_comment, ping.
 */
import { createHash } from "node:crypto";

export interface ForgeRepo {
  /** `owner/name` */
  fullName: string;
  fork?: boolean;
}

/** A stable fake 40-hex sha from a label, so tests can predict it. */
export const fakeSha = (label: string): string => createHash("sha1").update(label).digest("hex");

const user = (login: string) => ({ login, id: Number.parseInt(fakeSha(login).slice(0, 6), 16), type: "User", site_admin: false });

export const repository = (repo: ForgeRepo) => {
  const [owner = "", name = ""] = repo.fullName.split("/");
  return {
    id: Number.parseInt(fakeSha(repo.fullName).slice(0, 7), 16),
    node_id: `R_${fakeSha(repo.fullName).slice(0, 12)}`,
    name,
    full_name: repo.fullName,
    private: false,
    owner: user(owner),
    html_url: `https://github.com/${repo.fullName}`,
    fork: repo.fork ?? false,
    default_branch: "main",
  };
};

export interface Commit {
  message: string;
  added?: string[];
  modified?: string[];
  removed?: string[];
}

export const pushBody = (opts: { repo: string; ref?: string; sender: string; commits: Commit[] }) => {
  const commits = opts.commits.map((c, i) => ({
    id: fakeSha(`${opts.repo}:${c.message}:${i}`),
    tree_id: fakeSha(`tree:${c.message}:${i}`),
    distinct: true,
    message: c.message,
    timestamp: "2025-01-15T10:00:00+01:00",
    url: `https://github.com/${opts.repo}/commit/${fakeSha(`${opts.repo}:${c.message}:${i}`)}`,
    author: { name: opts.sender, email: `${opts.sender}@example.com`, username: opts.sender },
    committer: { name: opts.sender, email: `${opts.sender}@example.com`, username: opts.sender },
    added: c.added ?? [],
    removed: c.removed ?? [],
    modified: c.modified ?? [],
  }));
  const after = commits.at(-1)?.id ?? fakeSha("empty");
  return {
    ref: opts.ref ?? "refs/heads/main",
    before: fakeSha(`before:${after}`),
    after,
    repository: repository({ fullName: opts.repo }),
    pusher: { name: opts.sender, email: `${opts.sender}@example.com` },
    sender: user(opts.sender),
    created: false,
    deleted: false,
    forced: false,
    base_ref: null,
    compare: `https://github.com/${opts.repo}/compare/${fakeSha(`before:${after}`).slice(0, 12)}...${after.slice(0, 12)}`,
    commits,
    head_commit: commits.at(-1) ?? null,
  };
};

/**
 * `pull_request` with an action. `headRepo` is where the branch lives: the base repository itself,
 * or a fork (whose code must not see secrets).
 */
export const pullRequestBody = (opts: {
  repo: string;
  headRepo?: string;
  action?: string;
  number?: number;
  headRef?: string;
  baseRef?: string;
  sender: string;
  association?: string;
}) => {
  const headRepo = opts.headRepo ?? opts.repo;
  const number = opts.number ?? 7;
  const headRef = opts.headRef ?? "feature";
  const baseRef = opts.baseRef ?? "main";
  return {
    action: opts.action ?? "opened",
    number,
    pull_request: {
      url: `https://api.github.com/repos/${opts.repo}/pulls/${number}`,
      number,
      state: "open",
      title: `Change ${number}`,
      user: user(opts.sender),
      body: "Please review.",
      author_association: opts.association ?? (headRepo === opts.repo ? "MEMBER" : "NONE"),
      draft: false,
      head: {
        label: `${headRepo.split("/")[0]}:${headRef}`,
        ref: headRef,
        sha: fakeSha(`${headRepo}:${headRef}`),
        user: user(headRepo.split("/")[0] ?? ""),
        repo: repository({ fullName: headRepo, fork: headRepo !== opts.repo }),
      },
      base: {
        label: `${opts.repo.split("/")[0]}:${baseRef}`,
        ref: baseRef,
        sha: fakeSha(`${opts.repo}:${baseRef}`),
        user: user(opts.repo.split("/")[0] ?? ""),
        repo: repository({ fullName: opts.repo }),
      },
    },
    repository: repository({ fullName: opts.repo }),
    sender: user(opts.sender),
  };
};

/** `issue_comment` (created) on a pull request's conversation, by someone with `association` to the repository. */
export const issueCommentBody = (opts: { repo: string; sender: string; association: string; body: string; number?: number }) => {
  const number = opts.number ?? 3;
  return {
    action: "created",
    issue: {
      number,
      title: `Issue ${number}`,
      user: user(opts.sender),
      state: "open",
      author_association: opts.association,
      pull_request: { url: `https://api.github.com/repos/${opts.repo}/pulls/${number}` },
    },
    comment: {
      id: Number.parseInt(fakeSha(opts.body).slice(0, 8), 16),
      body: opts.body,
      user: user(opts.sender),
      author_association: opts.association,
      created_at: "2025-01-15T10:00:00Z",
    },
    repository: repository({ fullName: opts.repo }),
    sender: user(opts.sender),
  };
};

export const pingBody = (repo: string) => ({
  zen: "Keep it logically awesome.",
  hook_id: 292430182,
  hook: {
    type: "Repository",
    id: 292430182,
    active: true,
    events: ["push", "pull_request", "issue_comment"],
    config: { content_type: "json", insecure_ssl: "0" },
  },
  repository: repository({ fullName: repo }),
  sender: user(repo.split("/")[0] ?? ""),
});
