//! Test support: makes one SDK call of the protocol transcript with the Rust SDK
//! (agent-image/sdk/rust) and prints what came of it as one line of JSON: {"returns": value} or
//! {"throws": {code, exit, message}}. Built once by agent-image/src/protocol/transcript-rust.test.ts,
//! run as `flowsvc-sdk-driver '<SdkCall JSON>'` with FLOW_AGENT_SOCKET set; sdk_driver.py is the
//! same for the Python SDK (the call names are the TypeScript ones).

use flowsvc::{obj, state, Json};
use std::time::Duration;

fn text(v: Option<&Json>) -> &str {
    v.and_then(Json::as_str).unwrap_or("")
}

/// A transcript duration: "5m"-style text (s, m, h) or a number of seconds.
fn duration(v: &Json) -> Duration {
    if let Some(n) = v.as_f64() {
        return Duration::from_secs_f64(n);
    }
    let t = text(Some(v));
    let (n, unit) = t.split_at(t.len() - 1);
    let n: u64 = n.parse().expect("a whole number of units");
    Duration::from_secs(n * match unit { "s" => 1, "m" => 60, "h" => 3600, _ => panic!("unit {}", unit) })
}

fn run(call: &Json) -> flowsvc::Result<Json> {
    let empty = Json::Object(Vec::new());
    let args = match call.get("args") {
        Some(Json::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    let options = call.get("options").unwrap_or(&empty);
    let option = |k: &str| options.get(k).and_then(Json::as_str);
    let name = text(args.get(0));
    match text(call.get("call")) {
        "step" => {
            let cmd: Vec<&str> = match args.get(1) {
                Some(Json::Array(words)) => words.iter().filter_map(Json::as_str).collect(),
                _ => Vec::new(),
            };
            flowsvc::step_labelled(name, option("label"), &cmd).map(Json::String)
        }
        "stepFn" => {
            let fn_spec = call.get("fn").cloned().unwrap_or(Json::Null);
            flowsvc::step_fn(name, move || match fn_spec.get("throws") {
                Some(message) => Err(text(Some(message)).to_string()),
                None => Ok(fn_spec.get("returns").cloned().unwrap_or(Json::Null)),
            })
        }
        "sleep" => match args.get(0) {
            Some(Json::String(s)) => flowsvc::sleep_text(s),
            Some(v) => flowsvc::sleep(duration(v)),
            None => flowsvc::sleep_text(""),
        }
        .map(|_| Json::Null),
        "waitSignal" => flowsvc::wait_signal(name, options.get("timeout").map(duration)).map(|v| v.unwrap_or(Json::Null)),
        "emit" => flowsvc::emit(name, args.get(1), option("key")).map(Json::String),
        "callNode" => flowsvc::call_node(name, args.get(1)),
        "callGraph" => flowsvc::call_graph(name, args.get(1)),
        "callDefinition" => flowsvc::call_definition(name, args.get(1)),
        "state.get" => state::get(name, option("entity")).map(|v| v.unwrap_or(Json::Null)),
        "state.set" => state::set(name, args.get(1).unwrap_or(&Json::Null), option("entity")).map(|_| Json::Null),
        "state.delete" => state::delete(name, option("entity")).map(|_| Json::Null),
        "state.list" => state::list(option("entity")).map(Json::Object),
        other => panic!("the driver has no SDK call {}", other),
    }
}

fn main() {
    let arg = std::env::args().nth(1).expect("the SDK call as JSON");
    let call = Json::parse(&arg).expect("the SDK call is JSON");
    let out = match run(&call) {
        Ok(value) => obj(vec![("returns", value)]),
        Err(e) => {
            let mut thrown = vec![("code", Json::from(e.code)), ("message", Json::from(e.message))];
            if let Some(exit) = e.exit {
                thrown.push(("exit", Json::from(exit)));
            }
            obj(vec![("throws", obj(thrown))])
        }
    };
    println!("{}", out);
}
