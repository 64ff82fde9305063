/**
 * The terminal side of a local run (this is the CLI's printing layer: only print*.ts files write
 * to the process's streams). The script's output goes to our stdout and stderr as it comes (as
 * UTF-8 text, like the run log on a server); each write resolves once it was handed on, so a slow
 * reader (`flow run ... | less`) holds the script back as a pipe would. The engine's own
 * diagnostics become short `flow: ...` lines on stderr.
 */
import type { Writable } from "node:stream";
import type { Logger } from "@flowsvc/agent";

export interface LocalTerminal {
  stdout(text: string): Promise<void>;
  stderr(text: string): Promise<void>;
}

/** Resolves when the text was written, or could not be (a reader that went away: it is dropped). */
const writeTo = (stream: Writable, text: string): Promise<void> =>
  new Promise((resolve) => {
    if (text === "" || stream.destroyed) resolve();
    else stream.write(text, () => resolve());
  });

export const streamTerminal = (stdout: Writable, stderr: Writable): LocalTerminal => ({
  stdout: (text) => writeTo(stdout, text),
  stderr: (text) => writeTo(stderr, text),
});

export const processTerminal = (): LocalTerminal => streamTerminal(process.stdout, process.stderr);

const detail = (fields: Record<string, unknown>): string => {
  const err = fields["err"];
  return err instanceof Error ? `: ${err.message}` : "";
};

/**
 * The agent's logger for a local run: errors only, one readable line each. The agent's warnings
 * are about a server (a lost lease, a retried call, a job dispatched again): nothing locally.
 */
export const terminalDiagnostics = (terminal: LocalTerminal): Logger => {
  const say = (fields: Record<string, unknown>, msg: string): void => void terminal.stderr(`flow: error: ${msg}${detail(fields)}\n`);
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: () => undefined,
    error: say,
    child: () => logger,
  };
  return logger;
};
