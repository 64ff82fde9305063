//! One connection to the agent: a JSON request line out, a JSON answer line back.

use crate::json::{write_string, Json};
use crate::{base64, Error, Result};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicI64, Ordering};

static IDS: AtomicI64 = AtomicI64::new(1);

/// One request field; `None` leaves it out. Fields are written in the order given, as the protocol
/// transcript records them.
pub struct Field<'a> {
    key: &'a str,
    value: Option<Json>,
}

impl<'a> Field<'a> {
    pub fn text(key: &'a str, value: Option<&str>) -> Field<'a> {
        Field { key, value: value.map(|v| Json::String(v.to_string())) }
    }
    pub fn json(key: &'a str, value: Option<Json>) -> Field<'a> {
        Field { key, value }
    }
}

pub struct Conn {
    stream: BufReader<UnixStream>,
    protocol: i64,
}

/// One request line: {"v":2,"id":N,"op":op, ...fields}, as JSON.stringify writes it.
pub fn encode_request(op: &str, fields: &[Field<'_>], id: i64) -> String {
    let mut line = format!("{{\"v\":2,\"id\":{},\"op\":", id);
    write_string(&mut line, op);
    for f in fields {
        if let Some(v) = &f.value {
            line.push(',');
            write_string(&mut line, f.key);
            line.push(':');
            line.push_str(&v.to_string());
        }
    }
    line.push_str("}\n");
    line
}

impl Conn {
    pub fn open() -> Result<Conn> {
        let path = std::env::var("FLOW_AGENT_SOCKET").unwrap_or_default();
        if path.is_empty() {
            return Err(Error::new("no_agent_socket", "FLOW_AGENT_SOCKET is not set"));
        }
        let stream = UnixStream::connect(&path)
            .map_err(|e| Error::new("agent_unreachable", format!("cannot connect to the agent at {}: {}", path, e)))?;
        Ok(Conn { stream: BufReader::new(stream), protocol: 0 })
    }

    /// The agent's protocol version (asked once per connection).
    pub fn hello(&mut self) -> Result<i64> {
        if self.protocol == 0 {
            let answer = self.call("hello", &[])?;
            self.protocol = answer.get("protocol").and_then(Json::as_i64).or_else(|| answer.get("v").and_then(Json::as_i64)).unwrap_or(1);
        }
        Ok(self.protocol)
    }

    /// Sends one request and returns its answer; an `ok:false` answer is an Error. Blocks without a
    /// time limit: a call that parks the run is never answered.
    pub fn call(&mut self, op: &str, fields: &[Field<'_>]) -> Result<Json> {
        let line = encode_request(op, fields, IDS.fetch_add(1, Ordering::SeqCst));
        let lost = |e: std::io::Error| Error::new("agent_closed", format!("lost the connection to the agent: {}", e));
        self.stream.get_mut().write_all(line.as_bytes()).map_err(lost)?;
        let mut text = Vec::new();
        self.stream.read_until(b'\n', &mut text).map_err(lost)?;
        if text.last() != Some(&b'\n') {
            return Err(Error::new("agent_closed", "the agent closed the connection without answering"));
        }
        let answer = std::str::from_utf8(&text)
            .ok()
            .and_then(|t| Json::parse(t).ok())
            .filter(|a| matches!(a, Json::Object(_)))
            .ok_or_else(|| Error::new("malformed_answer", "the agent's answer is not a JSON object"))?;
        if answer.get("ok").and_then(Json::as_bool) != Some(true) {
            return Err(refusal(&answer, op));
        }
        Ok(answer)
    }
}

fn refusal(answer: &Json, op: &str) -> Error {
    let error = answer.get("error");
    let field = |k: &str| error.and_then(|e| e.get(k)).and_then(Json::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    Error {
        code: field("code").unwrap_or_else(|| "agent_error".into()),
        message: field("message").unwrap_or_else(|| format!("the agent refused the {} call", op)),
        exit: answer.get("exit").and_then(Json::as_i64).map(|n| n as i32),
        stdout: None,
    }
}

pub fn exit_of(answer: &Json) -> i32 {
    answer.get("exit").and_then(Json::as_i64).unwrap_or(0) as i32
}

pub fn stdout_text(answer: &Json) -> Result<String> {
    let data = answer.get("stdout_b64").and_then(Json::as_str).unwrap_or("");
    let bytes = base64::decode(data).ok_or_else(|| Error::new("malformed_answer", "the agent's stdout_b64 is not base64"))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The agent's stderr text without its "error: " prefix.
pub fn stderr_message(answer: &Json) -> Option<String> {
    let text = answer.get("stderr").and_then(Json::as_str)?.trim();
    if text.is_empty() {
        return None;
    }
    Some(text.strip_prefix("error: ").unwrap_or(text).to_string())
}

/// Text as a JSON value: parsed when it is JSON, else a string of it.
pub fn json_or_text(text: &str) -> Json {
    Json::parse(text).unwrap_or_else(|_| Json::String(text.to_string()))
}
