/**
 * What a secret's name and value may be: the one rule, used by the API (`PUT .../secrets/:name`),
 * the CLI (`flow secret set`, to fail before the request) and the claim (a row stored before a
 * rule existed is left out of the job, not allowed to break it). Every secret is injected into
 * every job of its project as an environment variable (spec, Secret rule 2), so a name is refused
 * when a program reads it at start to decide what code to load or run (one secret would then
 * change, or break, every process of every job), and a value is refused when a process
 * environment cannot carry it as it is.
 *
 * The problem functions answer a sentence (or undefined when all is well) that names the secret
 * but never quotes its value: a message can reach a log, a terminal or an HTTP body.
 */
import { FlowError } from "./errors.js";
import { hasLoneSurrogate } from "./json-guard.js";

/** Longest name, in characters (all ASCII): what a path segment of the API carries (Fastify's maxParamLength). */
export const SECRET_NAME_MAX = 100;
/** Largest value, in UTF-8 bytes: well under Linux's 128 KiB cap on one environment string. */
export const SECRET_VALUE_MAX_BYTES = 64 * 1024;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** An unpaired UTF-16 surrogate: JSON and JavaScript strings can hold one, UTF-8 cannot. */

interface ReservedNames {
  /** Upper-case; compared with the name upper-cased. */
  readonly exact?: readonly string[];
  readonly prefixes?: readonly string[];
  readonly why: string;
}

/**
 * Names refused for a secret, each group with its reason. Compared without regard to case: a
 * lower-case `ld_preload` does nothing on Linux today, but nothing is lost by refusing it, and
 * some systems (Windows, a shell's own aliases such as zsh's `path`) do not tell case apart.
 * Deliberately not refused: variables that only configure data (`TZ`, `LANG`, `LC_*`, proxies,
 * `SSL_CERT_FILE`), which a job may legitimately want from a secret.
 */
export const RESERVED_SECRET_NAMES: readonly ReservedNames[] = [
  { prefixes: ["FLOW_"], why: "FLOW_* variables are reserved for the service's own (the agent socket, the run id...)" },
  {
    prefixes: ["LD_", "DYLD_", "MALLOC_"],
    exact: [
      "GLIBC_TUNABLES",
      "GCONV_PATH",
      "GETCONF_DIR",
      "LOCPATH",
      "NLSPATH",
      "HOSTALIASES",
      "RES_OPTIONS",
      "LOCALDOMAIN",
      "RESOLV_HOST_CONF",
      "NIS_PATH",
      "TZDIR",
    ],
    why: "the dynamic loader or the C library reads it when every process starts (it can load code into every program a job runs)",
  },
  {
    prefixes: ["BASH_FUNC_"],
    exact: [
      "BASH_ENV",
      "ENV",
      "SHELLOPTS",
      "BASHOPTS",
      "PS4",
      "PROMPT_COMMAND",
      "IFS",
      "CDPATH",
      "GLOBIGNORE",
      "EXECIGNORE",
      "ZDOTDIR",
      "FPATH",
    ],
    why: "a shell reads it at start (it can run commands in, or change the meaning of, every script)",
  },
  {
    exact: ["PATH", "HOME", "SHELL", "TMPDIR"],
    why: "it decides which programs run, where their configuration is read from, or where temporary files go, for every process of a job",
  },
  {
    prefixes: ["PYTHON", "LUA_"],
    exact: [
      "NODE_OPTIONS",
      "NODE_PATH",
      "NODE_REPL_EXTERNAL_MODULE",
      "PERL5LIB",
      "PERL5OPT",
      "PERLLIB",
      "PERL5DB",
      "RUBYOPT",
      "RUBYLIB",
      "JAVA_TOOL_OPTIONS",
      "_JAVA_OPTIONS",
      "JDK_JAVA_OPTIONS",
      "CLASSPATH",
      "PHPRC",
      "PHP_INI_SCAN_DIR",
      "GOFLAGS",
      "GOENV",
      "GOTOOLCHAIN",
      "GOROOT",
    ],
    why: "an interpreter reads it at start (it can load code into every Node, Python, Perl, Ruby, Java, PHP, Lua or Go program a job runs)",
  },
  {
    prefixes: ["GIT_CONFIG"],
    exact: [
      "GIT_SSH",
      "GIT_SSH_COMMAND",
      "GIT_EXEC_PATH",
      "GIT_ASKPASS",
      "GIT_PROXY_COMMAND",
      "GIT_EXTERNAL_DIFF",
      "GIT_EDITOR",
      "GIT_PAGER",
      "GIT_SEQUENCE_EDITOR",
      "GIT_TEMPLATE_DIR",
      "GIT_DIR",
      "GIT_WORK_TREE",
    ],
    why: "git reads it as configuration or as a command to run (it can run code in every git command of a job)",
  },
];

/** A name as a message may show it: quoted, escaped, and cut short when long. */
const shown = (name: string): string => JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}...` : name);

/**
 * Why `name` cannot be an environment variable name at all; undefined when it can. `what` is how
 * the message calls the name ("secret name", "credential variable").
 */
export const envNameProblem = (name: string, what = "secret name"): string | undefined => {
  const a = /^[aeiou]/i.test(what) ? "an" : "a";
  if (name === "") return `${a} ${what} is empty`;
  if (name.length > SECRET_NAME_MAX) return `${a} ${what} is at most ${SECRET_NAME_MAX} characters; this one has ${name.length}`;
  if (!ENV_NAME.test(name))
    return `${what} ${shown(name)} is not an environment variable name: use ASCII letters, digits and _, not starting with a digit`;
  return undefined;
};

const reservedReason = (name: string): string | undefined => {
  const upper = name.toUpperCase();
  for (const group of RESERVED_SECRET_NAMES) {
    if (group.exact?.includes(upper) || group.prefixes?.some((p) => upper.startsWith(p))) return group.why;
  }
  return undefined;
};

/**
 * Why `name` cannot be the variable a secret (or a credential) is injected as; undefined when it
 * can. `what` is how the message calls the name.
 */
export const secretNameProblem = (name: string, what = "secret name"): string | undefined => {
  // The reserved check runs first so that `BASH_FUNC_x%%` is told why, not only that % is not allowed.
  const why = name.length <= SECRET_NAME_MAX ? reservedReason(name) : undefined;
  if (why !== undefined) return `${what} ${shown(name)} is refused: ${why}`;
  return envNameProblem(name, what);
};

/** How the rule's messages call a variable a user names for a run's environment (not a secret's or a credential's). */
export const ENV_VARIABLE = "env variable";

/**
 * Why `name` cannot be a variable a user sets in a run's environment; undefined when it can. The
 * same rule as a secret's name (a run's env reaches the same processes as a secret, and wins over
 * one): every way in uses it, with this one message, `env variable "LD_PRELOAD" is refused: ...`:
 * `flow submit --env` and `flow run --env`, the runs API's and a FlowRun's `env`, a pipeline's
 * `env:` (workflow and job), a graph code/shell node's `config.env`. `PATH` is refused rather
 * than ignored: the service sets it for every script and it wins (spec, Limits).
 */
export const envVariableProblem = (name: string): string | undefined => secretNameProblem(name, ENV_VARIABLE);

/** A variable cut short for a path segment: a 10,000-character name is not echoed whole. */
const cut = (variable: string): string => (variable.length > 64 ? `${variable.slice(0, 64)}...` : variable);

/**
 * A variable as a path segment of an error that joins its path as it is (`env.LD_PRELOAD`): as it
 * is when it is 1-64 letters, digits and _, else quoted, escaped and cut short (`env."A=B"`; a NUL
 * or a 10,000-character name is not echoed whole).
 */
export const variablePathKey = (variable: string): string => (/^[A-Za-z0-9_]{1,64}$/.test(variable) ? variable : shown(variable));

/** One problem of an env map: where, and the rule's sentence. */
export interface EnvMapProblem {
  /** The variable as it is in the map. */
  readonly variable: string;
  /** The variable cut short, for a path formatter that escapes what it must (graph, pipeline). */
  readonly segment: string;
  /** The variable safe to join into a path as it is (variablePathKey). */
  readonly key: string;
  readonly message: string;
}

/** Every variable of `env` that envVariableProblem refuses, in the map's order. */
export const envMapProblems = (env: Readonly<Record<string, unknown>>): EnvMapProblem[] => {
  const problems: EnvMapProblem[] = [];
  for (const variable of Object.keys(env)) {
    const message = envVariableProblem(variable);
    if (message !== undefined) problems.push({ variable, segment: cut(variable), key: variablePathKey(variable), message });
  }
  return problems;
};

const utf8Length = (value: string): number => new TextEncoder().encode(value).length;

/**
 * What JSON Schema can say of secretValueProblem, for the API's description (ingest/src/openapi):
 * not empty, no NUL, no lone surrogate (the pattern is read with the u flag, as ECMA-262 patterns in
 * JSON Schema validators are, so a surrogate pair is one character), at most as many characters as
 * the limit's bytes (the limit itself counts UTF-8 bytes, which JSON Schema cannot).
 */
export const SECRET_VALUE_JSON_SCHEMA = {
  type: "string",
  minLength: 1,
  maxLength: SECRET_VALUE_MAX_BYTES,
  pattern: "^[^\\u0000\\ud800-\\udfff]*$",
} as const;

/** Why `value` cannot be a secret's value; undefined when it can. Never quotes the value. */
export const secretValueProblem = (value: string): string | undefined => {
  if (value === "") return "the value is empty";
  if (value.includes("\u0000"))
    return "the value holds a NUL byte (\\0), and a process environment cannot hold one: no job could start with it";
  if (hasLoneSurrogate(value)) {
    return "the value is not valid Unicode text: it holds a lone surrogate (\\ud800-\\udfff without its pair), which UTF-8 cannot encode: it would be stored and injected as U+FFFD, another value than the one set";
  }
  // A UTF-16 unit is at most 3 UTF-8 bytes: only a long value needs encoding to be measured.
  const bytes = value.length * 3 > SECRET_VALUE_MAX_BYTES ? utf8Length(value) : value.length;
  if (bytes > SECRET_VALUE_MAX_BYTES) return `a secret value is at most ${SECRET_VALUE_MAX_BYTES} bytes (UTF-8); this one has ${bytes}`;
  return undefined;
};

/** Throws invalid_argument (HTTP 400, CLI exit 2) with the rule's sentence. */
export const assertSecretName = (name: string): void => {
  const problem = secretNameProblem(name);
  if (problem !== undefined) throw new FlowError("invalid_argument", problem, { details: { field: "name" } });
};

/** Throws invalid_argument (HTTP 400, CLI exit 2) with the rule's sentence, for the secret `name`. */
export const assertSecretValue = (name: string, value: string): void => {
  const problem = secretValueProblem(value);
  if (problem !== undefined) throw new FlowError("invalid_argument", `secret ${name}: ${problem}`, { details: { field: "value" } });
};
