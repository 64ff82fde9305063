/**
 * `flow signal <run-id> <name> [--payload <json>]` for a local run (one started by `flow run` on
 * this machine): the signal is written into the run's spool and no server is contacted.
 *
 * The user command calls deliverLocalSignal first; `false` means the id is not a local run here,
 * and the command goes on to the server.
 */
import { FlowError } from "@flowsvc/core";
import { localStateDir } from "./config.js";
import type { LocalEnvironment } from "./config.js";
import { localRunDir, localRunPresence, removeLocalRunDir } from "./local-run-dir.js";
import { spoolSignal } from "./signal-spool.js";

const parsePayload = (payloadJson: string | undefined): unknown => {
  if (payloadJson === undefined) return null;
  try {
    return JSON.parse(payloadJson) as unknown;
  } catch (err) {
    throw new FlowError("invalid_argument", `--payload is not valid JSON (${(err as Error).message})`, {
      hint: "quote the JSON for the shell, e.g. --payload '{\"approved\":true}'",
      cause: err,
    });
  }
};

/**
 * Delivers a signal to the local run `runId`. Answers true when it was a local run (the signal is
 * queued for it), false when no local run has that id. Throws FlowError("invalid_argument") for a
 * payload that is not JSON and FlowError("not_found") for a local run whose `flow run` is gone
 * (killed without cleaning up; its leftover directory is removed).
 * `env` is where the state directory is read from (default: the process environment).
 */
export const deliverLocalSignal = async (
  runId: string,
  name: string,
  payloadJson: string | undefined,
  env?: LocalEnvironment,
): Promise<boolean> => {
  const run = localRunDir(localStateDir(env), runId);
  if (!run) return false;
  const presence = await localRunPresence(run);
  if (presence === "none") return false;
  if (name === "") throw new FlowError("invalid_argument", "the signal name is empty");
  const payload = parsePayload(payloadJson);
  if (presence === "ended") {
    await removeLocalRunDir(run);
    throw new FlowError("not_found", `local run ${runId} is no longer running (its flow run process is gone)`, {
      hint: "start it again with `flow run <file>`",
    });
  }
  try {
    await spoolSignal(run, name, payload);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    throw new FlowError("not_found", `local run ${runId} ended before the signal arrived`, { cause: err });
  }
  return true;
};
