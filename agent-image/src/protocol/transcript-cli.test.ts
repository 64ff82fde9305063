/**
 * The protocol transcript (agent-image/protocol/transcript.json) replayed by the two `flow`
 * clients a script calls: the native binary (where it was built) and the Node fallback, each run
 * as a real process per case with the case's words.
 */
import { clients } from "../client/client-test-kit.js";
import { cliOutcome, replayTranscript, start } from "./replay.js";

for (const client of clients) {
  replayTranscript({
    name: `${client.name} client`,
    ids: "exact",
    expected: (c) => (c.cli === undefined ? undefined : c.expect.cli),
    start: (c, env, cwd) => start(client.bin, c.cli ?? [], { env, cwd, stdin: c.stdin ?? "" }),
    outcome: cliOutcome,
  });
}
