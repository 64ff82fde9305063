"""flowsvc: durable workflow primitives for Python scripts run by flowsvc.

One file, no dependencies, Python 3.8+ standard library only. Copy it next to your script (or put
its folder on sys.path) and::

    import flowsvc

    version = flowsvc.step("version", ["git", "rev-parse", "HEAD"]).strip()
    report = flowsvc.step_fn("report", lambda: {"version": version, "ok": True})
    flowsvc.sleep("5m")
    answer = flowsvc.wait_signal("approve", timeout="1h")   # None when the wait timed out
    deployed = flowsvc.call_graph("deploy", {"ref": version})   # a stored graph's output
    flowsvc.state.set("last-version", version, entity="deploys")

The SDK talks to the flowsvc agent over the Unix socket named by FLOW_AGENT_SOCKET (socket
protocol version 2: one JSON line each way). Every durable call is recorded by position: when the
run is replayed (after a sleep, a wait, an agent restart) each call returns its recorded result
instead of running again, so the script must make the same durable calls in the same order on
every pass.

When the run must park (a sleep, a wait with nothing to take yet) the agent does not answer: it
ends the script's process group, and a later pass replays the script from the top. The SDK simply
blocks on the socket until then.

Errors: an agent refusal raises FlowError(code, message); a step (or step_fn) whose command
failed raises StepFailed, a FlowError with exit_code and stdout; a call_node/call_graph whose child run
failed raises FlowError("call_failed", <the child's error>).
"""

from __future__ import annotations

import base64
import datetime
import errno
import itertools
import json
import os
import re
import socket
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

__all__ = [
    "FlowError",
    "StepFailed",
    "PROTOCOL_VERSION",
    "STEP_OUTPUT_LIMIT",
    "step",
    "step_fn",
    "sleep",
    "wait_signal",
    "emit",
    "call_node",
    "call_graph",
    "call_definition",
    "state",
    "duration_text",
]

#: The socket protocol version this SDK speaks.
PROTOCOL_VERSION = 2
#: The most stdout a step record keeps (2 MiB); past that the step is recorded as failed.
STEP_OUTPUT_LIMIT = 2 * 1024 * 1024

Duration = Union[str, int, float, datetime.timedelta]


class FlowError(Exception):
    """A call the agent refused (its `ok:false` answer), or one the SDK refused before sending.

    `code` is a short machine-readable word (e.g. "invalid_argument", "determinism",
    "no_agent_socket"); `message` is the human text; `exit` is the exit status the agent asked the
    `flow` CLI to use, when it gave one.
    """

    def __init__(self, code: str, message: str, exit: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.exit = exit

    def __str__(self) -> str:
        return self.message


class StepFailed(FlowError):
    """A step whose command exited non-zero (or a step_fn whose function raised), first pass or
    replayed. `exit_code` is the recorded exit status, `stdout` the recorded output text."""

    def __init__(self, exit_code: int, stdout: str, message: Optional[str] = None) -> None:
        super().__init__("step_failed", message or "step failed with exit code {}".format(exit_code), exit_code)
        self.exit_code = exit_code
        self.stdout = stdout


# ---- connection ----------------------------------------------------------------------------------

_ids = itertools.count(1)


def _socket_path() -> str:
    path = os.environ.get("FLOW_AGENT_SOCKET", "")
    if not path:
        raise FlowError("no_agent_socket", "FLOW_AGENT_SOCKET is not set")
    return path


def encode_request(op: str, fields: Dict[str, Any], request_id: int) -> bytes:
    """One request line: {"v":2,"id":N,"op":op, ...fields}; fields that are None are left out."""
    body: Dict[str, Any] = {"v": PROTOCOL_VERSION, "id": request_id, "op": op}
    for key, value in fields.items():
        if value is not None:
            body[key] = value
    return (json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


class _Connection:
    """One connection to the agent: a JSON line out, a JSON line back, as often as needed."""

    def __init__(self) -> None:
        path = _socket_path()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(path)
        except OSError as err:
            self._sock.close()
            raise FlowError("agent_unreachable", "cannot connect to the agent at {}: {}".format(path, err.strerror or err)) from None
        self._buffer = bytearray()
        self._protocol = 0

    def __enter__(self) -> "_Connection":
        return self

    def __exit__(self, *_: Any) -> None:
        self._sock.close()

    def hello(self) -> int:
        """The agent's protocol version (asked once per connection)."""
        if self._protocol == 0:
            answer = self.call("hello")
            version = answer.get("protocol")
            if not isinstance(version, int) or isinstance(version, bool):
                version = answer.get("v") if isinstance(answer.get("v"), int) else 1
            self._protocol = version
        return self._protocol

    def call(self, op: str, **fields: Any) -> Dict[str, Any]:
        """Sends one request and returns its answer; an `ok:false` answer raises FlowError.
        Blocks without a time limit: a call that parks the run is never answered."""
        line = encode_request(op, fields, next(_ids))
        try:
            self._sock.sendall(line)
            answer = _decode_answer(self._read_line())
        except OSError as err:
            raise FlowError("agent_closed", "lost the connection to the agent: {}".format(err.strerror or err)) from None
        if answer.get("ok") is not True:
            error = answer.get("error") if isinstance(answer.get("error"), dict) else {}
            exit_status = answer.get("exit") if isinstance(answer.get("exit"), int) else None
            raise FlowError(str(error.get("code") or "agent_error"), str(error.get("message") or "the agent refused the {} call".format(op)), exit_status)
        return answer

    def _read_line(self) -> bytes:
        scanned = 0
        while True:
            nl = self._buffer.find(b"\n", scanned)
            if nl >= 0:
                line = bytes(self._buffer[:nl])
                del self._buffer[: nl + 1]
                return line
            scanned = len(self._buffer)
            chunk = self._sock.recv(65536)
            if not chunk:
                raise FlowError("agent_closed", "the agent closed the connection without answering")
            self._buffer += chunk


def _decode_answer(line: bytes) -> Dict[str, Any]:
    try:
        answer = json.loads(line.decode("utf-8"))
    except ValueError:
        raise FlowError("malformed_answer", "the agent's answer is not JSON") from None
    if not isinstance(answer, dict):
        raise FlowError("malformed_answer", "the agent's answer is not a JSON object")
    return answer


def _stdout_bytes(answer: Dict[str, Any]) -> bytes:
    data = answer.get("stdout_b64")
    if not data:
        return b""
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        raise FlowError("malformed_answer", "the agent's stdout_b64 is not base64") from None


def _stdout_text(answer: Dict[str, Any]) -> str:
    return _stdout_bytes(answer).decode("utf-8", errors="replace")


def _exit_of(answer: Dict[str, Any]) -> int:
    value = answer.get("exit", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _stderr_message(answer: Dict[str, Any]) -> Optional[str]:
    text = answer.get("stderr")
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.strip()
    return text[len("error: "):] if text.startswith("error: ") else text


def _json_text(value: Any) -> str:
    """Compact JSON, as JSON.stringify writes it; NaN and infinities are refused."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _parse_json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# ---- durations -----------------------------------------------------------------------------------


def duration_text(duration: Duration) -> str:
    """A duration as the agent takes it: humantime text ("5s", "1m", "2h", "30d") is passed as is;
    seconds (int or float) and timedelta become whole milliseconds, e.g. 1.5 -> "1500ms"."""
    if isinstance(duration, bool):
        raise TypeError("a duration is humantime text (e.g. \"5s\") or a number of seconds, not a bool")
    if isinstance(duration, datetime.timedelta):
        duration = duration.total_seconds()
    if isinstance(duration, (int, float)):
        if duration != duration or duration < 0 or duration == float("inf"):
            raise ValueError("a duration must be a finite number of seconds, zero or more; got {!r}".format(duration))
        return "{}ms".format(int(round(duration * 1000)))
    if isinstance(duration, str):
        text = duration.strip()
        if not text:
            raise ValueError("a duration is empty")
        return text
    raise TypeError("a duration is humantime text (e.g. \"5s\") or a number of seconds; got {}".format(type(duration).__name__))


# ---- steps ---------------------------------------------------------------------------------------


def _step_env(idempotency_key: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
    env["FLOW_IDEMPOTENCY_KEY"] = idempotency_key
    return env


def _run_body(cmd: List[str], idempotency_key: str):  # -> (exit, kept bytes, total bytes)
    try:
        if not cmd[0]:  # as execvp says for an empty name (the flow CLI records 127 too)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cmd[0])
        proc = subprocess.Popen(cmd, env=_step_env(idempotency_key), stdout=subprocess.PIPE)
    except OSError as err:
        missing = err.errno == errno.ENOENT
        why = "command not found" if missing and "/" not in cmd[0] else (err.strerror or str(err))
        sys.stderr.write("flowsvc step: {}: {}\n".format(cmd[0], why))
        sys.stderr.flush()
        return (127 if missing else 126), b"", 0
    kept = bytearray()
    total = 0
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        total += len(chunk)
        if len(kept) < STEP_OUTPUT_LIMIT:
            kept += chunk[: STEP_OUTPUT_LIMIT - len(kept)]
    proc.stdout.close()
    code = proc.wait()
    return (code if code >= 0 else 128 - code), bytes(kept), total


def _complete(conn: _Connection, position: Any, exit_code: int, kept: bytes, total: int) -> None:
    """Records a new step's result; an over-limit output comes back as a recorded failure."""
    try:
        conn.call(
            "step.complete",
            position=position,
            stdout_b64=base64.b64encode(kept).decode("ascii"),
            exit=exit_code,
            overflow_bytes=total if total > STEP_OUTPUT_LIMIT else None,
        )
    except FlowError as err:
        if err.code == "step_output_too_large":
            raise StepFailed(err.exit if err.exit is not None else 1, "", err.message) from None
        raise


def _replayed(answer: Dict[str, Any]) -> str:
    """A replayed step's stdout, or its recorded failure raised."""
    stdout = _stdout_text(answer)
    exit_code = _exit_of(answer)
    if exit_code != 0:
        raise StepFailed(exit_code, stdout, _stderr_message(answer))
    return stdout


def _begin(conn: _Connection, name: str, label: Optional[str]) -> Dict[str, Any]:
    if not isinstance(name, str) or not name:
        raise FlowError("invalid_argument", "a step needs a non-empty name")
    answer = conn.call("step", name=name, label=label)
    if not answer.get("replay"):
        if answer.get("position") is None or not isinstance(answer.get("idempotency_key"), str):
            raise FlowError("malformed_answer", "the agent's step answer has no position or idempotency_key")
    return answer


def step(name: str, cmd: Sequence[str], label: Optional[str] = None) -> str:
    """Runs `cmd` once as a durable step and returns its stdout (decoded as UTF-8).

    The command runs with the script's environment minus every FLOW_* variable, plus
    FLOW_IDEMPOTENCY_KEY (the same on every replay), in the current directory; its stderr goes to
    the script's stderr. Its stdout is returned, not echoed. A non-zero exit raises StepFailed. On
    replay the command does not run: the recorded stdout is returned (or the failure raised).
    """
    if isinstance(cmd, (str, bytes)) or not cmd or not all(isinstance(a, str) for a in cmd):
        raise TypeError("step() takes the command as a non-empty list of strings, e.g. [\"make\", \"all\"]")
    with _Connection() as conn:
        answer = _begin(conn, name, label)
        if answer.get("replay"):
            return _replayed(answer)
        exit_code, kept, total = _run_body(list(cmd), answer["idempotency_key"])
        _complete(conn, answer["position"], exit_code, kept, total)
        stdout = kept.decode("utf-8", errors="replace")
        if exit_code != 0:
            raise StepFailed(exit_code, stdout)
        return stdout


def step_fn(name: str, fn: Callable[[], Any], label: Optional[str] = None) -> Any:
    """Runs `fn()` once as a durable step and returns its JSON-serialisable result.

    The result is recorded as the step's stdout (JSON text, exit 0) and returned as it reads back
    from JSON on every pass (a tuple comes back as a list, on the first pass too), so the script
    sees the same value whether the step ran or replayed. When `fn` raises an Exception, the step
    is recorded as failed (exit 1, the error text as stdout) and StepFailed is raised (chained to
    the original exception on the first pass); a replay raises the same StepFailed without calling
    `fn`. A result that is not JSON-serialisable is recorded as such a failure too.
    """
    if not callable(fn):
        raise TypeError("step_fn() takes a function of no arguments")
    with _Connection() as conn:
        answer = _begin(conn, name, label)
        if answer.get("replay"):
            return json.loads(_replayed(answer))
        error: Optional[BaseException] = None
        try:
            value = fn()
            try:
                text = _json_text(value)
            except (TypeError, ValueError) as err:
                raise TypeError("step_fn {!r} returned a value that is not JSON-serialisable: {}".format(name, err)) from err
            exit_code = 0
        except Exception as err:  # noqa: BLE001 - any failure of the body is the step's failure
            error = err
            text = str(err) or type(err).__name__
            exit_code = 1
        data = text.encode("utf-8")
        _complete(conn, answer["position"], exit_code, data[:STEP_OUTPUT_LIMIT], len(data))
        if error is not None:
            raise StepFailed(exit_code, text) from error
        return json.loads(text)


# ---- waits ---------------------------------------------------------------------------------------


def sleep(duration: Duration) -> None:
    """A durable sleep: "5s", "1m", "2h", "30d", or seconds as a number. The run parks (the agent
    slot is freed) and the script is replayed from the top once the timer fired."""
    text = duration_text(duration)
    with _Connection() as conn:
        conn.call("sleep", duration=text)


def wait_signal(name: str, timeout: Optional[Duration] = None) -> Any:
    """Waits for the next signal named `name` sent to this run (`flow signal <run> <name>
    --payload <json>`) and returns its payload parsed from JSON. With `timeout`, returns None when
    the wait timed out; the outcome is recorded, so a replay takes the same branch. Names starting
    "event:" are refused. A bounded wait needs an agent that speaks socket protocol v2."""
    if not isinstance(name, str) or not name:
        raise FlowError("invalid_argument", "wait_signal needs a non-empty signal name")
    if name.startswith("event:"):
        raise FlowError("invalid_argument", "signal names starting \"event:\" are refused: {!r} names an event, not a signal".format(name), 2)
    timeout_text = duration_text(timeout) if timeout is not None else None
    with _Connection() as conn:
        if timeout_text is not None:
            version = conn.hello()
            if version < 2:
                raise FlowError(
                    "unsupported_protocol",
                    "bounded waits need an agent that speaks socket protocol v2 (this agent speaks v{})".format(version),
                )
        answer = conn.call("wait-signal", name=name, timeout=timeout_text)
    exit_code = _exit_of(answer)
    if exit_code == 124:
        return None
    if exit_code != 0:
        raise FlowError("wait_failed", _stderr_message(answer) or "wait_signal {!r} failed with exit code {}".format(name, exit_code), exit_code)
    text = _stdout_text(answer).strip()
    return _parse_json_or_text(text) if text else None


# ---- events --------------------------------------------------------------------------------------


#: An event type: 1-64 of [A-Za-z0-9._-] (docs/internals.md; the flow clients and the agent check it too).
_EVENT_TYPE = re.compile(r"[A-Za-z0-9._-]{1,64}")


def emit(type: str, payload: Any = None, key: Optional[str] = None) -> str:  # noqa: A002 - the spec's word
    """Emits an event of `type` with a JSON-serialisable `payload` and an optional subject `key`;
    returns the event id. Checkpointed by position: a replay returns the same id. A type that is
    not 1-64 of [A-Za-z0-9._-] is refused before anything is sent (exit 2)."""
    if not isinstance(type, str) or not type:
        raise FlowError("invalid_argument", "emit needs a non-empty event type")
    if not _EVENT_TYPE.fullmatch(type):
        raise FlowError("invalid_argument", "an event type is 1-64 characters from [A-Za-z0-9._-], got {}".format(type), 2)
    with _Connection() as conn:
        answer = conn.call("emit", type=type, key=key, payload=payload)
    event_id = answer.get("event_id")
    return event_id if isinstance(event_id, str) and event_id else _stdout_text(answer).strip()


# ---- calls ---------------------------------------------------------------------------------------


def _call_outcome(answer: Dict[str, Any]) -> Any:
    """The child run's output parsed from JSON; a failed or cancelled child raises call_failed."""
    exit_code = _exit_of(answer)
    if exit_code != 0:
        text = _stderr_message(answer) or ""
        text = text[len("flow: call: "):] if text.startswith("flow: call: ") else text
        raise FlowError("call_failed", text or "the called run failed (exit code {})".format(exit_code), exit_code)
    text = _stdout_text(answer).strip()
    return _parse_json_or_text(text) if text else None


def _call_child(**fields: Any) -> Any:
    with _Connection() as conn:
        return _call_outcome(conn.call("call", **fields))


def _non_empty(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise FlowError("invalid_argument", "{} must be a non-empty string".format(what), 2)
    return value


def call_node(kind: str, config: Optional[Dict[str, Any]] = None) -> Any:
    """Runs one node of `kind` with `config` (a dict) as a child run, waits for it and returns the
    node's output (`flow call node <kind> --config <json>`). The run parks until the child ends; the
    call is checkpointed by position, so a replay returns the recorded output and starts no child.
    A failed or cancelled child raises FlowError("call_failed", <its error>) with exit 1."""
    _non_empty("call_node's kind", kind)
    if config is not None and not isinstance(config, dict):
        raise TypeError("call_node's config must be a dict (a JSON object)")
    return _call_child(node=kind, config=config)


def call_graph(name: str, input: Any = None) -> Any:  # noqa: A002 - the CLI's word
    """Runs the stored graph `name` with `input` (a JSON-serialisable value) as a child run and
    returns its output (`flow call graph <name> --input <json>`); as call_node otherwise."""
    return _call_child(graph=_non_empty("call_graph's name", name), input=input)


def call_definition(definition: Union[str, bytes, Dict[str, Any]], input: Any = None) -> Any:  # noqa: A002
    """Runs a graph document (its JSON text, or the document as a dict) with `input` as a child run
    and returns its output (`flow call graph --definition <file> --input <json>`); the server checks
    it as any submitted graph. As call_node otherwise."""
    if isinstance(definition, dict):
        data = _json_text(definition).encode("utf-8")
    elif isinstance(definition, str):
        data = definition.encode("utf-8")
    elif isinstance(definition, bytes):
        data = definition
    else:
        raise TypeError("call_definition takes the graph document as JSON text or a dict")
    if not data:
        raise FlowError("invalid_argument", "call_definition's document must not be empty", 2)
    return _call_child(definition_b64=base64.b64encode(data).decode("ascii"), input=input)


# ---- state ---------------------------------------------------------------------------------------


class _State:
    """Key-value state: run-private, or project-wide under an `entity`. Not checkpointed: every
    replay pass reads and writes the current value.

    The agent prints a string value raw and any other value as JSON (as `flow state get` does), so
    from that text alone a string that reads as JSON ("42", "1.10", "true") comes back parsed.
    When the answer also carries the value itself (`found` and `value` for get, `items` for list),
    that is used instead and every value round-trips exactly.
    """

    @staticmethod
    def _call(action: str, key: Optional[str] = None, entity: Optional[str] = None, value: Optional[str] = None) -> Dict[str, Any]:
        with _Connection() as conn:
            return conn.call("state", action=action, key=key, entity=entity, value=value)

    def get(self, key: str, entity: Optional[str] = None) -> Any:
        """The value, or None when the key is unset."""
        answer = self._call("get", key=key, entity=entity)
        if isinstance(answer.get("found"), bool):
            return answer.get("value") if answer["found"] else None
        text = _stdout_text(answer)
        if text == "":
            return None
        return _parse_json_or_text(text[:-1] if text.endswith("\n") else text)

    def set(self, key: str, value: Any, entity: Optional[str] = None) -> None:
        """Stores a JSON-serialisable value."""
        self._call("set", key=key, entity=entity, value=_json_text(value))

    def delete(self, key: str, entity: Optional[str] = None) -> None:
        self._call("delete", key=key, entity=entity)

    def list(self, entity: Optional[str] = None) -> Dict[str, Any]:
        """Every key and its value."""
        answer = self._call("list", entity=entity)
        items = answer.get("items")
        if isinstance(items, list) and all(isinstance(i, dict) and isinstance(i.get("key"), str) for i in items):
            return {i["key"]: i.get("value") for i in items}
        out: Dict[str, Any] = {}
        for line in _stdout_text(answer).split("\n"):
            if line:
                key, _, value = line.partition("\t")
                out[key] = _parse_json_or_text(value)
        return out


#: flowsvc.state.get(key), .set(key, value), .delete(key), .list(); each takes entity=.
state = _State()
