/**
 * Helpers the end-to-end tests share to submit scripts and read runs through the real `flow` CLI.
 * `runKit` takes getters so a file can bind its helpers at the top, before `before()` has started
 * the server and made the script directory.
 */
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { isTerminalStatus } from "@flowsvc/core";
import pg from "pg";
import type { CliResult, TestServer } from "./server.js";
import { waitFor } from "./wait.js";

/** A run id anywhere in a text (`flow submit` prints it on stdout, `--follow` on stderr). */
export const RUN_ID = /run-[0-9a-z]{26}/;

/** How long a test lets `flow follow` (or `submit --follow`) take. */
export const FOLLOW_TIMEOUT = { timeoutMs: 90_000 };

/** What `flow status -o json` answers; each test reads the fields it needs. */
export interface RunView {
  id: string;
  status: string;
  tags?: string[];
  substate?: { name: string; kind?: string } | null;
  error?: string | null;
  parent_run_id?: string | null;
  annotations?: unknown[];
  output?: Record<string, unknown> | null;
}

/** Asserts the CLI exited 0 (showing its whole output otherwise) and answers its result. */
export const ok = (r: CliResult): CliResult => {
  assert.equal(r.code, 0, `exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
};

/** How often `part` occurs in `text`. */
export const count = (text: string, part: string): number => text.split(part).length - 1;

/** A waitFor check: the file exists. */
export const exists = (path: string) => (): Promise<boolean> =>
  readFile(path).then(
    () => true,
    () => false,
  );

/** The run id in a CLI's output; fails the test when there is none. */
export const runIdIn = (text: string): string => {
  const run = RUN_ID.exec(text)?.[0];
  assert.ok(run, `no run id in: ${text}`);
  return run;
};

/** Waits until the run has ended (succeeded, failed or cancelled) and answers that status. */
export const ended = async (server: TestServer, run: string, timeoutMs = 60_000): Promise<string> => {
  let status = "";
  await waitFor(
    `run ${run} to end`,
    async () => {
      const r = await server.cli(["status", run, "-o", "json"]);
      status = r.code === 0 ? (JSON.parse(r.stdout) as { status: string }).status : `error: ${r.stderr}`;
      return isTerminalStatus(status);
    },
    timeoutMs,
  );
  return status;
};

/** The run's stored log so far (stdout and stderr), read from the server's database. */
export const storedLog = async (server: TestServer, run: string): Promise<string> => {
  const client = new pg.Client({ connectionString: server.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ data: string }>(
      `select data from run_logs where run_id = $1 and stream <> 'system' order by id`,
      [run],
    );
    return rows.map((r) => r.data).join("");
  } finally {
    await client.end();
  }
};

export interface RunKit {
  /** `flow <args> -o json`, which must exit 0, parsed. */
  json: <T>(args: string[]) => Promise<T>;
  /** Writes `source` to `name` in the script directory; answers the path. */
  script: (name: string, source: string) => Promise<string>;
  /** Submits `source` as a bash script and answers its run id (the script runs on). */
  start: (name: string, source: string) => Promise<string>;
  /** Submits `source` with `--follow` (and `args`): the run id and the CLI result, whatever its exit. */
  submit: (name: string, source: string, args?: string[]) => Promise<{ run: string; r: CliResult }>;
  /** Follows a run to its end: its whole log and the exit status `flow follow` maps its outcome to. */
  follow: (run: string) => Promise<CliResult>;
  /** `flow status <run> -o json`. */
  status: <T extends { status: string } = RunView>(run: string) => Promise<T>;
  /** A waitFor check: the run is parked (and its substate name passes `substate`, when given). */
  parked: (run: string, substate?: (name: string) => boolean) => () => Promise<boolean>;
}

/** The helpers bound to a server and a script directory (see scriptDir), both read when called. */
export const runKit = (server: () => TestServer, dir: () => string): RunKit => {
  const json = async <T>(args: string[]): Promise<T> => JSON.parse(ok(await server().cli([...args, "-o", "json"])).stdout) as T;
  const script = async (name: string, source: string): Promise<string> => {
    const file = join(dir(), name);
    await writeFile(file, source);
    return file;
  };
  const status = <T extends { status: string } = RunView>(run: string): Promise<T> => json<T>(["status", run]);
  return {
    json,
    script,
    status,
    start: async (name, source) => runIdIn(ok(await server().cli(["submit", await script(name, source)])).stdout),
    submit: async (name, source, args = []) => {
      const r = await server().cli(["submit", await script(name, source), ...args, "--follow"], FOLLOW_TIMEOUT);
      return { run: runIdIn(r.stderr), r };
    },
    follow: (run) => server().cli(["follow", run], FOLLOW_TIMEOUT),
    parked: (run, substate) => async () => {
      const s = await status(run);
      return s.status === "parked" && (substate === undefined || substate(s.substate?.name ?? ""));
    },
  };
};
