"""Test support: makes one SDK call of the protocol transcript with the Python SDK
(agent-image/sdk/python/flowsvc.py) and prints what came of it as one line of JSON:
{"returns": value} or {"throws": {code, exit, message}}. Run as
`python3 sdk_driver.py '<SdkCall JSON>'` with FLOW_AGENT_SOCKET set; agent-image/src/protocol/
sdk-driver.ts is the same for the TypeScript SDK (the call names are the TypeScript ones).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk", "python"))
sys.dont_write_bytecode = True

import flowsvc  # noqa: E402


def _fn(spec):
    def body():
        if "throws" in spec:
            raise RuntimeError(spec["throws"])
        return spec.get("returns")

    return body


CALLS = {
    "step": lambda a, o, fn: flowsvc.step(*a, **o),
    "stepFn": lambda a, o, fn: flowsvc.step_fn(a[0], fn, **o),
    "sleep": lambda a, o, fn: flowsvc.sleep(*a),
    "waitSignal": lambda a, o, fn: flowsvc.wait_signal(*a, **o),
    "emit": lambda a, o, fn: flowsvc.emit(*a, **o),
    "callNode": lambda a, o, fn: flowsvc.call_node(*a, **o),
    "callGraph": lambda a, o, fn: flowsvc.call_graph(*a, **o),
    "callDefinition": lambda a, o, fn: flowsvc.call_definition(*a, **o),
    "state.get": lambda a, o, fn: flowsvc.state.get(*a, **o),
    "state.set": lambda a, o, fn: flowsvc.state.set(*a, **o),
    "state.delete": lambda a, o, fn: flowsvc.state.delete(*a, **o),
    "state.list": lambda a, o, fn: flowsvc.state.list(*a, **o),
}


def outcome(call):
    run = CALLS[call["call"]]
    try:
        return {"returns": run(call["args"], call.get("options", {}), _fn(call.get("fn", {})))}
    except flowsvc.StepFailed as err:
        return {"throws": {"code": err.code, "exit": err.exit_code, "message": err.message}}
    except flowsvc.FlowError as err:
        return {"throws": {"code": err.code, "exit": err.exit, "message": err.message}}


print(json.dumps(outcome(json.loads(sys.argv[1])), ensure_ascii=False, separators=(",", ":")), flush=True)
