/**
 * `flowsvc-controller admin-token [--revoke-others]`: the recovery path for a lost admin token
 * (README "Run it on Kubernetes"), run in the controller's container (`kubectl exec
 * deploy/<release>-flowsvc-controller -- flowsvc-controller admin-token`), so it reads the
 * controller's own configuration. It mints a NEW token for the user admin and prints it on stdout,
 * alone; the other tokens keep working unless --revoke-others. It neither migrates nor makes admin:
 * a database it cannot reach, or without admin, is refused (stderr, exit 1).
 */
import { FlowError } from "@flowsvc/core";
import { createPool, endPool, mintAdminToken } from "@flowsvc/store";
import { loadControllerConfig } from "./config.js";
import { withTimeout } from "./timeout.js";

const NAME = "flowsvc-controller admin-token";
const USAGE = `usage: ${NAME} [--revoke-others]\n  Prints a new API token of the user admin. --revoke-others: every other token of admin stops working.\n`;
/** How long the database may take to answer before the command gives up. */
const CONNECT_TIMEOUT_MS = 10_000;

const fail = (message: string, status: number): number => {
  process.stderr.write(`${NAME}: ${message}\n`);
  return status;
};

/** A database error as the operator can act on it (never the URL: it may hold a password). */
const dbProblem = (err: unknown): string => {
  const e = err as { code?: string; message?: string };
  if (e.code === "42P01") return "the database has no flowsvc tables (has the controller ever started on it?)";
  return `cannot reach the database (FLOWSVC_DATABASE_URL): ${e.message || e.code || String(err)}`;
};

/** Runs the command; answers its exit status. */
export const runAdminTokenCommand = async (args: readonly string[]): Promise<number> => {
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(USAGE);
    return 0;
  }
  const unknown = args.find((a) => a !== "--revoke-others");
  if (unknown !== undefined) return fail(`unknown argument ${JSON.stringify(unknown)}\n${USAGE}`, 2);
  let databaseUrl: string;
  try {
    databaseUrl = loadControllerConfig().databaseUrl;
  } catch (err) {
    return fail(err instanceof FlowError ? err.message : String(err), 2);
  }
  const pool = createPool(databaseUrl, { max: 1, applicationName: NAME, allowExitOnIdle: true });
  try {
    await withTimeout(pool.query("select 1"), CONNECT_TIMEOUT_MS);
    const { token, revoked } = await mintAdminToken(pool, { revokeOthers: args.includes("--revoke-others") });
    process.stdout.write(`${token}\n`);
    if (revoked > 0) process.stderr.write(`${NAME}: revoked ${revoked} other token(s) of admin\n`);
    return 0;
  } catch (err) {
    return fail(err instanceof FlowError ? err.message : dbProblem(err), 1);
  } finally {
    await withTimeout(endPool(pool), 2000).catch(() => undefined);
  }
};
