//! flowsvc: durable steps, sleeps, signal waits, events, calls of child graph runs and state for Rust
//! programs run by flowsvc, over the agent's Unix socket (`FLOW_AGENT_SOCKET`, socket protocol v2: one
//! JSON line each way).
//! No dependencies outside `std`.
//!
//! ```no_run
//! use std::time::Duration;
//! let version = flowsvc::step("version", &["git", "rev-parse", "HEAD"])?;
//! flowsvc::sleep(Duration::from_secs(600))?;
//! match flowsvc::wait_signal("approve", Some(Duration::from_secs(3600)))? {
//!     Some(payload) => println!("approved: {}", payload),
//!     None => println!("nobody approved within the hour"),
//! }
//! # Ok::<(), flowsvc::Error>(())
//! ```
//!
//! Every durable call is recorded by position: when the run is replayed (after a sleep, a wait, an
//! agent restart) each call returns its recorded result instead of running again, so a program must
//! make the same durable calls in the same order on every pass. When the run must park, the agent
//! does not answer: it ends the program's process group and replays it later. A call simply blocks
//! on the socket until then.

mod base64;
mod json;
mod wire;

pub use json::{obj, Json};

use std::fmt;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;
use wire::{Conn, Field};

/// The socket protocol version this SDK speaks.
pub const PROTOCOL_VERSION: i64 = 2;
/// The most stdout a step record keeps (2 MiB); past that the step is recorded as failed.
pub const STEP_OUTPUT_LIMIT: usize = 2 * 1024 * 1024;

/// A call the agent refused (its `ok:false` answer), one the SDK refused before sending, or a failed
/// step (`code` "step_failed", `exit` its exit code, `stdout` its recorded output).
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    /// A short machine-readable word: "invalid_argument", "determinism", "no_agent_socket",
    /// "unsupported_protocol", "step_failed", ...
    pub code: String,
    pub message: String,
    /// The exit status the agent asked for; a failed step's exit code.
    pub exit: Option<i32>,
    /// A failed step's recorded stdout.
    pub stdout: Option<String>,
}

impl Error {
    pub(crate) fn new(code: &str, message: impl Into<String>) -> Error {
        Error { code: code.to_string(), message: message.into(), exit: None, stdout: None }
    }

    fn with_exit(mut self, exit: i32) -> Error {
        self.exit = Some(exit);
        self
    }

    fn step_failed(exit: i32, stdout: String, message: Option<String>) -> Error {
        let message = message.unwrap_or_else(|| format!("step failed with exit code {}", exit));
        Error { code: "step_failed".into(), message, exit: Some(exit), stdout: Some(stdout) }
    }

    /// A step (or step_fn) that failed, first pass or replayed.
    pub fn is_step_failed(&self) -> bool {
        self.code == "step_failed"
    }

    /// A call (`call_node`, `call_graph`, `call_definition`) whose child run failed or was cancelled.
    pub fn is_call_failed(&self) -> bool {
        self.code == "call_failed"
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn invalid(exit: Option<i32>, message: String) -> Error {
    let e = Error::new("invalid_argument", message);
    match exit {
        Some(code) => e.with_exit(code),
        None => e,
    }
}

// ---- durations ----------------------------------------------------------------------------------

/// A duration as the agent takes it (humantime) in its largest whole unit: 30d, 2h, 5m, 10s, else
/// milliseconds (1.5 s is "1500ms"; below a millisecond rounds to the nearest one).
pub fn duration_text(d: Duration) -> String {
    let ms = (d.as_micros() + 500) / 1000;
    for (unit, suffix) in [(86_400_000u128, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s")] {
        if ms > 0 && ms % unit == 0 {
            return format!("{}{}", ms / unit, suffix);
        }
    }
    format!("{}ms", ms)
}

// ---- steps --------------------------------------------------------------------------------------

/// Runs `cmd` once as a durable step and returns its stdout (as UTF-8, lossily).
///
/// The command runs without a shell (pass `["sh", "-c", "..."]` for one) in the current directory
/// with the program's environment minus every `FLOW_*` variable, plus `FLOW_IDEMPOTENCY_KEY` (the
/// same on every replay); its stdin and stderr are the program's. Its stdout is returned, not echoed.
/// A non-zero exit is an `Error` with `is_step_failed()`. On replay the command does not run: the
/// record is returned (or its failure).
pub fn step(name: &str, cmd: &[&str]) -> Result<String> {
    step_labelled(name, None, cmd)
}

/// `step` with a display label (the name plus its ordinal identifies the step).
pub fn step_labelled(name: &str, label: Option<&str>, cmd: &[&str]) -> Result<String> {
    if cmd.is_empty() {
        return Err(invalid(None, "step takes the command as a non-empty list of words, e.g. [\"make\", \"all\"]".into()));
    }
    let (mut conn, answer) = begin(name, label)?;
    if is_replay(&answer) {
        return replayed(&answer);
    }
    let key = answer.get("idempotency_key").and_then(Json::as_str).unwrap_or("").to_string();
    let (exit, kept, total) = run_body(cmd, &key);
    complete(&mut conn, &answer, exit, &kept, total)?;
    let stdout = String::from_utf8_lossy(&kept).into_owned();
    if exit != 0 {
        return Err(Error::step_failed(exit, stdout, None));
    }
    Ok(stdout)
}

/// Runs `f` once as a durable step and returns its result as it reads back from JSON.
///
/// The result is recorded as JSON text (exit 0) and returned parsed back on every pass, the first one
/// too. When `f` returns `Err(text)` (or a value JSON cannot hold, such as NaN), the step is recorded
/// as failed (exit 1, the text as its stdout) and a step_failed `Error` is returned; a replay returns
/// the same failure without calling `f`.
pub fn step_fn<F>(name: &str, f: F) -> Result<Json>
where
    F: FnOnce() -> std::result::Result<Json, String>,
{
    let (mut conn, answer) = begin(name, None)?;
    if is_replay(&answer) {
        return parse_record(name, &replayed(&answer)?);
    }
    let (text, exit) = match f().and_then(|v| v.to_json()) {
        Ok(text) => (text, 0),
        Err(message) => (message, 1),
    };
    let data = text.as_bytes();
    complete(&mut conn, &answer, exit, &data[..data.len().min(STEP_OUTPUT_LIMIT)], data.len())?;
    if exit != 0 {
        return Err(Error::step_failed(exit, text, None));
    }
    parse_record(name, &text)
}

fn parse_record(name: &str, text: &str) -> Result<Json> {
    Json::parse(text).map_err(|e| Error::new("malformed_record", format!("the record of step {:?} is not JSON: {}", name, e)))
}

fn is_replay(answer: &Json) -> bool {
    answer.get("replay").and_then(Json::as_bool) == Some(true)
}

fn begin(name: &str, label: Option<&str>) -> Result<(Conn, Json)> {
    if name.is_empty() {
        return Err(invalid(None, "a step needs a non-empty name".into()));
    }
    let mut conn = Conn::open()?;
    let answer = conn.call("step", &[Field::text("name", Some(name)), Field::text("label", label)])?;
    let complete = answer.get("position").is_some() && answer.get("idempotency_key").and_then(Json::as_str).is_some();
    if !is_replay(&answer) && !complete {
        return Err(Error::new("malformed_answer", "the agent's step answer has no position or idempotency_key"));
    }
    Ok((conn, answer))
}

/// A replayed step's stdout, or its recorded failure.
fn replayed(answer: &Json) -> Result<String> {
    let stdout = wire::stdout_text(answer)?;
    match wire::exit_of(answer) {
        0 => Ok(stdout),
        exit => Err(Error::step_failed(exit, stdout, wire::stderr_message(answer))),
    }
}

/// Records a new step's result; an over-limit output comes back as a recorded failure.
fn complete(conn: &mut Conn, answer: &Json, exit: i32, kept: &[u8], total: usize) -> Result<()> {
    let position = answer.get("position").cloned().unwrap_or(Json::Null);
    let overflow = if total > STEP_OUTPUT_LIMIT { Some(Json::Number(total as f64)) } else { None };
    let fields = [
        Field::json("position", Some(position)),
        Field::text("stdout_b64", Some(&base64::encode(kept))),
        Field::json("exit", Some(Json::from(exit))),
        Field::json("overflow_bytes", overflow),
    ];
    match conn.call("step.complete", &fields) {
        Err(e) if e.code == "step_output_too_large" => Err(Error::step_failed(e.exit.unwrap_or(1), String::new(), Some(e.message))),
        other => other.map(|_| ()),
    }
}

/// Runs a step's command: its exit status (127 when not found, 128+n for signal n), the first
/// STEP_OUTPUT_LIMIT bytes of its stdout and the whole count.
fn run_body(cmd: &[&str], key: &str) -> (i32, Vec<u8>, usize) {
    let env = std::env::vars_os().filter(|(k, _)| !k.to_string_lossy().starts_with("FLOW_"));
    let spawned = Command::new(cmd[0])
        .args(&cmd[1..])
        .env_clear()
        .envs(env)
        .env("FLOW_IDEMPOTENCY_KEY", key)
        .stdin(Stdio::inherit())
        .stderr(Stdio::inherit())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => return (start_failure(cmd[0], &err), Vec::new(), 0),
    };
    let (mut kept, mut total) = (Vec::new(), 0usize);
    if let Some(mut out) = child.stdout.take() {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
            let room = STEP_OUTPUT_LIMIT.saturating_sub(kept.len()).min(n);
            kept.extend_from_slice(&buf[..room]);
        }
    }
    (exit_status(child.wait()), kept, total)
}

fn start_failure(program: &str, err: &std::io::Error) -> i32 {
    let missing = program.is_empty() || err.kind() == std::io::ErrorKind::NotFound;
    let why = if missing && !program.contains('/') { "command not found".to_string() } else { err.to_string() };
    eprintln!("flowsvc step: {}: {}", program, why);
    if missing {
        127
    } else {
        126
    }
}

fn exit_status(status: std::io::Result<std::process::ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => s.code().or_else(|| s.signal().map(|n| 128 + n)).unwrap_or(1),
        Err(_) => 1,
    }
}

// ---- sleep and waits ----------------------------------------------------------------------------

/// A durable sleep: the run parks (the agent slot is freed) and the program is replayed from the top
/// once the timer fired; on that pass `sleep` returns at once.
pub fn sleep(d: Duration) -> Result<()> {
    sleep_text(&duration_text(d))
}

/// `sleep` with humantime text as the agent takes it ("5s", "1m", "2h", "30d").
pub fn sleep_text(duration: &str) -> Result<()> {
    let text = duration.trim();
    if text.is_empty() {
        return Err(invalid(Some(2), "a duration is empty".into()));
    }
    Conn::open()?.call("sleep", &[Field::text("duration", Some(text))]).map(|_| ())
}

/// Waits for the next signal named `name` sent to this run (`flow signal <run> <name> --payload
/// <json>`) and returns `Some(payload)` (`Json::Null` for a signal without one). With a timeout,
/// returns `None` when it passed; the outcome is recorded, so a replay takes the same branch. A
/// bounded wait needs an agent that speaks socket protocol v2 (else "unsupported_protocol"). Names
/// starting "event:" are refused.
pub fn wait_signal(name: &str, timeout: Option<Duration>) -> Result<Option<Json>> {
    if name.is_empty() {
        return Err(invalid(None, "wait_signal needs a non-empty signal name".into()));
    }
    if name.starts_with("event:") {
        return Err(invalid(Some(2), format!("signal names starting \"event:\" are refused: {:?} names an event, not a signal", name)));
    }
    let timeout = timeout.map(duration_text);
    let mut conn = Conn::open()?;
    if timeout.is_some() {
        let version = conn.hello()?;
        if version < PROTOCOL_VERSION {
            return Err(Error::new(
                "unsupported_protocol",
                format!("bounded waits need an agent that speaks socket protocol v2 (this agent speaks v{})", version),
            ));
        }
    }
    let answer = conn.call("wait-signal", &[Field::text("name", Some(name)), Field::text("timeout", timeout.as_deref())])?;
    match wire::exit_of(&answer) {
        124 => return Ok(None),
        0 => {}
        exit => {
            let message = wire::stderr_message(&answer).unwrap_or_else(|| format!("wait_signal {:?} failed with exit code {}", name, exit));
            return Err(Error::new("wait_failed", message).with_exit(exit));
        }
    }
    let text = wire::stdout_text(&answer)?;
    let text = text.trim();
    Ok(Some(if text.is_empty() { Json::Null } else { wire::json_or_text(text) }))
}

// ---- events -------------------------------------------------------------------------------------

fn valid_event_type(t: &str) -> bool {
    (1..=64).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Emits an event of `event_type` with an optional payload and subject `key`; returns the event id.
/// Checkpointed by position: a replay returns the same id. A type that is not 1-64 of
/// `[A-Za-z0-9._-]` is refused before anything is sent.
pub fn emit(event_type: &str, payload: Option<&Json>, key: Option<&str>) -> Result<String> {
    if !valid_event_type(event_type) {
        return Err(invalid(Some(2), format!("an event type is 1-64 characters from [A-Za-z0-9._-], got {}", event_type)));
    }
    if let Some(p) = payload {
        p.to_json().map_err(|e| invalid(None, format!("the payload of {} is not JSON: {}", event_type, e)))?;
    }
    let fields = [Field::text("type", Some(event_type)), Field::text("key", key), Field::json("payload", payload.cloned())];
    let answer = Conn::open()?.call("emit", &fields)?;
    match answer.get("event_id").and_then(Json::as_str) {
        Some(id) if !id.is_empty() => Ok(id.to_string()),
        _ => Ok(wire::stdout_text(&answer)?.trim().to_string()),
    }
}

// ---- calls --------------------------------------------------------------------------------------

/// Runs one node of `kind` with `config` (a JSON object; `None`: none) as a child run, waits for it
/// and returns the node's output (`flow call node <kind> --config <json>`). The run parks until the
/// child ends; the call is checkpointed by position, so a replay returns the recorded output and
/// starts no child. A failed or cancelled child is an `Error` with code "call_failed", exit 1 and the
/// child's error as its message (`is_call_failed()`).
pub fn call_node(kind: &str, config: Option<&Json>) -> Result<Json> {
    if kind.is_empty() {
        return Err(invalid(Some(2), "call_node's kind must be a non-empty string".into()));
    }
    let config = call_value("config", config)?;
    if let Some(c) = &config {
        if !matches!(c, Json::Object(_)) {
            return Err(invalid(Some(2), format!("call_node's config must be a JSON object, got {}", c)));
        }
    }
    call_child(&[Field::text("node", Some(kind)), Field::json("config", config)])
}

/// Runs the stored graph `name` with `input` (`None`: none) as a child run and returns its output
/// (`flow call graph <name> --input <json>`); as `call_node` otherwise.
pub fn call_graph(name: &str, input: Option<&Json>) -> Result<Json> {
    if name.is_empty() {
        return Err(invalid(Some(2), "call_graph's name must be a non-empty string".into()));
    }
    let input = call_value("input", input)?;
    call_child(&[Field::text("graph", Some(name)), Field::json("input", input)])
}

/// Runs a graph document (its JSON text) with `input` as a child run and returns its output (`flow
/// call graph --definition <file> --input <json>`); the server checks it as any submitted graph. As
/// `call_node` otherwise.
pub fn call_definition(definition: &str, input: Option<&Json>) -> Result<Json> {
    if definition.is_empty() {
        return Err(invalid(Some(2), "call_definition's document must not be empty".into()));
    }
    let input = call_value("input", input)?;
    call_child(&[Field::text("definition_b64", Some(&base64::encode(definition.as_bytes()))), Field::json("input", input)])
}

/// An optional JSON argument as a request field: `None` for none or null; refused when JSON cannot hold it (NaN).
fn call_value(what: &str, value: Option<&Json>) -> Result<Option<Json>> {
    match value {
        None | Some(Json::Null) => Ok(None),
        Some(v) => {
            v.to_json().map_err(|e| invalid(Some(2), format!("the {} is not JSON: {}", what, e)))?;
            Ok(Some(v.clone()))
        }
    }
}

fn call_child(fields: &[Field<'_>]) -> Result<Json> {
    let answer = Conn::open()?.call("call", fields)?;
    match wire::exit_of(&answer) {
        0 => {}
        exit => {
            let text = wire::stderr_message(&answer).unwrap_or_default();
            let text = text.strip_prefix("flow: call: ").unwrap_or(&text);
            let message = if text.is_empty() { format!("the called run failed (exit code {})", exit) } else { text.to_string() };
            return Err(Error::new("call_failed", message).with_exit(exit));
        }
    }
    let text = wire::stdout_text(&answer)?;
    let text = text.trim();
    Ok(if text.is_empty() { Json::Null } else { wire::json_or_text(text) })
}

// ---- state --------------------------------------------------------------------------------------

/// Key-value state: private to the run, or project-wide under an `entity`. Not checkpointed: every
/// replay pass reads and writes the current value.
pub mod state {
    use crate::wire::{self, Conn, Field};
    use crate::{invalid, Json, Result};

    fn call(action: &str, key: Option<&str>, entity: Option<&str>, value: Option<&str>) -> Result<Json> {
        let fields = [Field::text("action", Some(action)), Field::text("key", key), Field::text("entity", entity), Field::text("value", value)];
        Conn::open()?.call("state", &fields)
    }

    /// The value, or `None` when the key is unset.
    pub fn get(key: &str, entity: Option<&str>) -> Result<Option<Json>> {
        let answer = call("get", Some(key), entity, None)?;
        if let Some(found) = answer.get("found").and_then(Json::as_bool) {
            return Ok(if found { Some(answer.get("value").cloned().unwrap_or(Json::Null)) } else { None });
        }
        let text = wire::stdout_text(&answer)?;
        Ok(if text.is_empty() { None } else { Some(wire::json_or_text(text.strip_suffix('\n').unwrap_or(&text))) })
    }

    /// Stores a JSON value.
    pub fn set(key: &str, value: &Json, entity: Option<&str>) -> Result<()> {
        let text = value.to_json().map_err(|e| invalid(None, format!("the value of {} is not JSON: {}", key, e)))?;
        call("set", Some(key), entity, Some(&text)).map(|_| ())
    }

    pub fn delete(key: &str, entity: Option<&str>) -> Result<()> {
        call("delete", Some(key), entity, None).map(|_| ())
    }

    /// Every key and its value, in the agent's order.
    pub fn list(entity: Option<&str>) -> Result<Vec<(String, Json)>> {
        let answer = call("list", None, entity, None)?;
        if let Some(Json::Array(items)) = answer.get("items") {
            return Ok(items
                .iter()
                .filter_map(|i| Some((i.get("key")?.as_str()?.to_string(), i.get("value").cloned().unwrap_or(Json::Null))))
                .collect());
        }
        let text = wire::stdout_text(&answer)?;
        Ok(text
            .split('\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once('\t').unwrap_or((l, ""));
                (k.to_string(), wire::json_or_text(v))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_their_largest_whole_unit() {
        let cases = [(0, "0ms"), (1500, "1500ms"), (90_000, "90s"), (300_000, "5m"), (7_200_000, "2h"), (2_592_000_000, "30d")];
        for (ms, want) in cases {
            assert_eq!(duration_text(Duration::from_millis(ms)), want);
        }
        assert_eq!(duration_text(Duration::from_micros(1499)), "1ms");
    }

    #[test]
    fn refused_before_anything_is_sent() {
        std::env::set_var("FLOW_AGENT_SOCKET", "/nonexistent/agent.sock");
        for t in ["", "deploy done", "tick\0\n", "déploy", &"x".repeat(65)] {
            let e = emit(t, None, None).unwrap_err();
            assert_eq!((e.code.as_str(), e.exit), ("invalid_argument", Some(2)), "{:?}", t);
        }
        assert_eq!(emit("ok", Some(&Json::Number(f64::NAN)), None).unwrap_err().code, "invalid_argument");
        assert_eq!(wait_signal("event:deploy.done", None).unwrap_err().code, "invalid_argument");
        assert_eq!(step("build", &[]).unwrap_err().code, "invalid_argument");
        assert_eq!(sleep_text(" ").unwrap_err().code, "invalid_argument");
        assert_eq!(call_node("", None).unwrap_err().code, "invalid_argument");
        for config in [Json::from(vec![1]), Json::from("text"), Json::Number(1e300)] {
            assert_eq!(call_node("emit", Some(&config)).unwrap_err().code, "invalid_argument", "{}", config);
        }
        assert_eq!(call_graph("deploy", Some(&Json::Number(f64::NAN))).unwrap_err().code, "invalid_argument");
        assert_eq!(call_graph("", None).unwrap_err().code, "invalid_argument");
        assert_eq!(call_definition("", None).unwrap_err().code, "invalid_argument");
        assert_eq!(call_graph("deploy", Some(&Json::Null)).unwrap_err().code, "agent_unreachable");
        assert_eq!(step("build", &["true"]).unwrap_err().code, "agent_unreachable");
    }

    #[test]
    fn request_lines_are_written_as_json_stringify() {
        let line = wire::encode_request("step", &[Field::text("name", Some("é \"q\" \\ \u{0}\u{1f}\u{7f}\u{2028}")), Field::text("label", None)], 7);
        assert_eq!(line, "{\"v\":2,\"id\":7,\"op\":\"step\",\"name\":\"é \\\"q\\\" \\\\ \\u0000\\u001f\u{7f}\u{2028}\"}\n");
    }
}
