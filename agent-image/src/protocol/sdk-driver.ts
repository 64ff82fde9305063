/**
 * Test support: makes one SDK call of the protocol transcript with the TypeScript SDK
 * (../sdk/flowsvc.ts) and prints what came of it as one line of JSON: `{"returns": value}` or
 * `{"throws": {code, exit, message}}`. Run as `node sdk-driver.js '<SdkCall JSON>'` with
 * FLOW_AGENT_SOCKET set; agent-image/protocol/sdk_driver.py is the same for the Python SDK.
 */
import {
  FlowError,
  StepFailed,
  callDefinition,
  callGraph,
  callNode,
  emit,
  sleep,
  state,
  step,
  stepFn,
  waitSignal,
} from "../sdk/flowsvc.js";
import type { Json, JsonObject, SdkCall } from "./transcript.js";

type Call = (args: readonly Json[], options: JsonObject, fn: () => unknown) => Promise<unknown>;

const text = (x: Json | undefined): string => x as string;

const CALLS: Readonly<Record<string, Call>> = {
  step: (a, o) => step(text(a[0]), a[1] as string[], o),
  stepFn: (a, o, fn) => stepFn(text(a[0]), fn, o),
  sleep: (a) => sleep(a[0] as string | number),
  waitSignal: (a, o) => waitSignal(text(a[0]), o),
  emit: (a, o) => emit(text(a[0]), a[1], o),
  callNode: (a) => callNode(text(a[0]), a[1] as JsonObject | undefined),
  callGraph: (a) => callGraph(text(a[0]), a[1]),
  callDefinition: (a) => callDefinition(text(a[0]), a[1]),
  "state.get": (a, o) => state.get(text(a[0]), o),
  "state.set": (a, o) => state.set(text(a[0]), a[1], o),
  "state.delete": (a, o) => state.delete(text(a[0]), o),
  "state.list": (_a, o) => state.list(o),
};

const fnOf =
  (call: SdkCall): (() => unknown) =>
  () => {
    if (call.fn && "throws" in call.fn) throw new Error(call.fn.throws);
    return call.fn?.returns;
  };

const outcome = async (call: SdkCall): Promise<unknown> => {
  const run = CALLS[call.call];
  if (!run) throw new Error(`the driver has no SDK call ${call.call}`);
  try {
    return { returns: (await run(call.args, call.options ?? {}, fnOf(call))) ?? null };
  } catch (err) {
    if (!(err instanceof FlowError)) throw err;
    return { throws: { code: err.code, exit: err instanceof StepFailed ? err.exitCode : err.exit, message: err.message } };
  }
};

process.stdout.write(`${JSON.stringify(await outcome(JSON.parse(process.argv[2] ?? "{}") as SdkCall))}\n`);
