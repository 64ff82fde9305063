/**
 * The protocol transcript (agent-image/protocol/transcript.json) replayed by the two SDKs: the
 * TypeScript SDK (dist/sdk/flowsvc.js) through sdk-driver.js in a real node process, the Python
 * SDK (sdk/python/flowsvc.py) through protocol/sdk_driver.py in a real python3 process. SDK
 * request ids are numbered per process (the agent does not read them), so only they may differ.
 */
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { repoRoot } from "../client/client-test-kit.js";
import { replayTranscript, sdkOutcome, start } from "./replay.js";
import type { Speaker } from "./replay.js";

const tsDriver = fileURLToPath(new URL("./sdk-driver.js", import.meta.url));
const pyDriver = join(repoRoot, "agent-image", "protocol", "sdk_driver.py");
/** python3 on this process's PATH (a case runs with a fixed PATH); FLOWSVC_TEST_PYTHON replays with another Python (the SDK supports 3.8+). */
const onPath = (program: string): string =>
  (process.env["PATH"] ?? "")
    .split(delimiter)
    .filter((dir) => dir !== "")
    .map((dir) => join(dir, program))
    .find((file) => existsSync(file)) ?? program;
const python = process.env["FLOWSVC_TEST_PYTHON"] ?? onPath("python3");

const sdk = (name: string, program: string, driver: string): Speaker => ({
  name,
  ids: "any-integer",
  expected: (c) => (c.sdk === undefined ? undefined : c.expect.sdk),
  start: (c, env, cwd) => start(program, [driver, JSON.stringify(c.sdk)], { env, cwd }),
  outcome: sdkOutcome,
});

replayTranscript(sdk("TypeScript SDK", process.execPath, tsDriver));
replayTranscript(sdk("Python SDK", python, pyDriver));
