/**
 * The one credential resolver (spec, "Credential" rules 1-6, "Where a credential or connected
 * account may be named", "Graph requirements report"). Given what a job or node declares and what
 * its project holds under each name, it decides what each variable or header gets, or why the job
 * fails. Fail closed: a name that is missing, held twice, of the wrong kind, an account that needs
 * reconnecting, a value that does not open, or any credential at all for an untrusted run fails
 * the whole job, and nothing is handed out.
 *
 * Callers: the claim (ingest/src/routes/agent-claim.ts, scripts with `--credential ENV=name`), the
 * submit-time check and the requirements report (checkConnection), and http/connector nodes
 * (checkConnection, then render.ts).
 */
import { FlowError } from "../errors.js";
import { secretNameProblem } from "../secret-rules.js";
import { CLI_KIND_SPELLINGS, credentialNameProblem, shownName, type CredentialKind, type CredentialValue } from "./kinds.js";
import { credentialEnvValue, credentialMaskValues } from "./render.js";

/** A connected account's status (spec, "Connected account status"). */
export const ACCOUNT_STATUSES = ["active", "refreshing", "needs_reauth", "in_doubt", "disabled"] as const;
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number];
/** The statuses an account may be used in; the others fail the node with a reconnect message. */
export const USABLE_ACCOUNT_STATUSES: readonly AccountStatus[] = ["active", "refreshing"];
/** An account's token is an OAuth access token: it authenticates as a bearer credential does. */
export const ACCOUNT_KIND: CredentialKind = "bearer";

/** What a project holds under one name: a credential, a connected account, both (a conflict), or neither. */
export interface NameHolding {
  readonly credential?: { readonly kind: CredentialKind };
  readonly account?: { readonly status: AccountStatus };
}

/** The requirements report's states (spec, "Graph requirements report"). */
export const CONNECTION_STATES = ["ok", "missing", "wrong_kind", "conflict", "needs_reconnect"] as const;
export type ConnectionState = (typeof CONNECTION_STATES)[number];

export interface ConnectionCheck {
  readonly state: ConnectionState;
  /** Present when something is stored under the name. */
  readonly stored_kind?: CredentialKind;
  /** Why it is not `ok`, in a sentence that names the credential; absent when `ok`. */
  readonly problem?: string;
}

const kindsText = (kinds: readonly CredentialKind[]): string => kinds.map((k) => CLI_KIND_SPELLINGS[k]).join(" or ");

const accountCheck = (name: string, status: AccountStatus, required: readonly CredentialKind[] | undefined): ConnectionCheck => {
  if (!USABLE_ACCOUNT_STATUSES.includes(status))
    return {
      state: "needs_reconnect",
      stored_kind: ACCOUNT_KIND,
      problem: `connected account ${shownName(name)} is ${status}: reconnect it on the Connections page`,
    };
  if (required && !required.includes(ACCOUNT_KIND))
    return {
      state: "wrong_kind",
      stored_kind: ACCOUNT_KIND,
      problem: `${shownName(name)} is a connected account (a ${CLI_KIND_SPELLINGS[ACCOUNT_KIND]} token); ${kindsText(required)} is required`,
    };
  return { state: "ok", stored_kind: ACCOUNT_KIND };
};

/**
 * The state of one named credential or account against what the use requires (`required` absent:
 * any kind will do). The submit-time check, the requirements report and the claim all ask this.
 */
export const checkConnection = (name: string, holding: NameHolding | undefined, required?: readonly CredentialKind[]): ConnectionCheck => {
  const { credential, account } = holding ?? {};
  if (credential && account)
    return {
      state: "conflict",
      stored_kind: credential.kind,
      problem: `${shownName(name)} is held by both a credential and a connected account, so it resolves to neither: remove one`,
    };
  if (account) return accountCheck(name, account.status, required);
  if (!credential)
    return {
      state: "missing",
      problem: `credential ${shownName(name)} is not set in this project: set it with \`flow credential set ${name} --kind ...\``,
    };
  if (required && !required.includes(credential.kind))
    return {
      state: "wrong_kind",
      stored_kind: credential.kind,
      problem: `credential ${shownName(name)} is stored as ${CLI_KIND_SPELLINGS[credential.kind]}; ${kindsText(required)} is required`,
    };
  return { state: "ok", stored_kind: credential.kind };
};

/** Most variables one job may declare. */
export const MAX_DECLARED_CREDENTIALS = 64;

/**
 * Why a declared `ENV_VAR -> credential name` map cannot be used, one sentence per problem, each
 * naming where (`credentials.LD_PRELOAD: ...`). The variable follows the secret name rules (a
 * credential is injected as a variable as a secret is: `LD_PRELOAD`, `PATH`, `FLOW_*` are refused).
 */
export const credentialMapProblems = (map: Readonly<Record<string, string>>, where = "credentials"): string[] => {
  const entries = Object.entries(map);
  if (entries.length > MAX_DECLARED_CREDENTIALS)
    return [`${where}: at most ${MAX_DECLARED_CREDENTIALS} credential variables; ${entries.length} were given`];
  const problems: string[] = [];
  for (const [variable, name] of entries) {
    const p = secretNameProblem(variable, "credential variable") ?? credentialNameProblem(name);
    if (p !== undefined) problems.push(`${where}.${variable.length > 64 ? `${variable.slice(0, 64)}...` : variable}: ${p}`);
  }
  return problems;
};

/** Throws invalid_argument with every problem of the map (credentialMapProblems). */
export const assertCredentialMap = (map: Readonly<Record<string, string>>, where = "credentials"): void => {
  const problems = credentialMapProblems(map, where);
  if (problems.length > 0) throw new FlowError("invalid_argument", problems.join("; "), { details: { field: where } });
};

/**
 * `ENV=name` as `flow submit --credential` takes it: split at the first `=`, both sides non-empty
 * and checked by the map's rules.
 */
export const parseCredentialFlag = (text: string): [variable: string, name: string] => {
  const at = text.indexOf("=");
  if (at <= 0 || at === text.length - 1)
    throw new FlowError("invalid_argument", `--credential ${shownName(text)}: expected ENV_VAR=credential_name`, {
      details: { field: "credential" },
    });
  const pair: [string, string] = [text.slice(0, at), text.slice(at + 1)];
  assertCredentialMap({ [pair[0]]: pair[1] }, "--credential");
  return pair;
};

/** What the project holds under a declared name, with the value when it is a credential that opened. */
export interface ResolvedHolding extends NameHolding {
  /** The credential's value; absent when it did not open with the server's keys. */
  readonly value?: CredentialValue;
  /** A usable account's current access token. */
  readonly accountToken?: string;
}

export interface JobCredentialRequest {
  /** `ENV_VAR -> credential name`, as the job declares it (a script's `--credential`, a node's `credentials`). */
  readonly declared: Readonly<Record<string, string>>;
  /** The run's trust (core/src/trust.ts): an untrusted run gets no credential at all. */
  readonly trusted: boolean;
  /** What the project holds under each declared name. */
  readonly holdings: ReadonlyMap<string, ResolvedHolding>;
}

export type JobCredentials =
  | { readonly ok: true; readonly env: Record<string, string>; readonly masks: string[] }
  | { readonly ok: false; readonly problems: string[] };

const valueOf = (name: string, h: ResolvedHolding | undefined): { value: string; masks: string[] } | string => {
  const got = holdingValue(name, h);
  if (!got.ok) return got.problem;
  return { value: credentialEnvValue(got.value), masks: credentialMaskValues(got.value) };
};

/**
 * The value an http or connector node authenticates with under `name` (render.ts's renderHttpAuth
 * takes it): a credential's own value, or a usable connected account's token as a bearer value. Or
 * why the node must fail without sending anything (missing, conflict, wrong kind, an account to
 * reconnect, a value that does not open).
 */
export const holdingValue = (
  name: string,
  holding: ResolvedHolding | undefined,
  required?: readonly CredentialKind[],
): { ok: true; value: CredentialValue } | { ok: false; problem: string } => {
  const check = checkConnection(name, holding, required);
  if (check.problem !== undefined) return { ok: false, problem: check.problem };
  if (holding?.account)
    return holding.accountToken === undefined
      ? { ok: false, problem: `connected account ${shownName(name)} has no usable token: reconnect it on the Connections page` }
      : { ok: true, value: { kind: "bearer", token: holding.accountToken } };
  if (holding?.value === undefined)
    return { ok: false, problem: `credential ${shownName(name)} does not open with this server's keys: set it again` };
  return { ok: true, value: holding.value };
};

/**
 * The variables a job's declared credentials become, or every reason the job must fail instead. A
 * job either gets all of them or none: never a variable left unset (spec, Errors).
 */
export const resolveJobCredentials = (req: JobCredentialRequest): JobCredentials => {
  const declared = Object.entries(req.declared);
  if (declared.length === 0) return { ok: true, env: {}, masks: [] };
  if (!req.trusted)
    return {
      ok: false,
      problems: [
        `the run was started by an untrusted event and gets no credentials, but it declares ${declared.map(([v, n]) => `${v}=${n}`).join(", ")}`,
      ],
    };
  const problems = credentialMapProblems(req.declared);
  const env = new Map<string, string>();
  const masks: string[] = [];
  for (const [variable, name] of declared) {
    const got = valueOf(name, req.holdings.get(name));
    if (typeof got === "string") problems.push(`${variable}: ${got}`);
    else {
      env.set(variable, got.value);
      masks.push(...got.masks);
    }
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, env: Object.fromEntries(env), masks };
};

/**
 * A job's environment by the spec's precedence, later wins: the project's secrets, the workflow's
 * literal `env:`, then its named credentials (Secret rule 3, Credential rule 3).
 */
export const layerJobEnv = (
  secrets: Readonly<Record<string, string>>,
  env: Readonly<Record<string, string>>,
  credentials: Readonly<Record<string, string>>,
): Record<string, string> => {
  // A Map, then fromEntries: a variable named `__proto__` stays a plain entry.
  const out = new Map<string, string>();
  for (const layer of [secrets, env, credentials]) for (const [k, v] of Object.entries(layer)) out.set(k, v);
  return Object.fromEntries(out);
};
