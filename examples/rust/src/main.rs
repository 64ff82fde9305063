//! A durable Rust program: two steps, a sleep and a bounded wait for an approval signal.
//!
//!     cargo build --release --manifest-path examples/rust/Cargo.toml
//!     npx flow submit examples/rust/durable.sh --follow
//!
//! The sleep parks the run and the program is run again from the top: the steps return their
//! records without running again. Answer the wait with
//! `flow signal <run> approve --payload '{"by":"ann"}'` within 2 seconds, or it times out.

use flowsvc::{obj, Json};
use std::time::Duration;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {}", e);
        std::process::exit(1);
    }
}

fn run() -> flowsvc::Result<()> {
    println!("pass starts");
    let version = flowsvc::step("version", &["sh", "-c", "echo building >&2; echo 1.4.2"])?.trim().to_string();
    let plan = flowsvc::step_fn("plan", || {
        eprintln!("planning");
        Ok(obj(vec![("version", Json::from(version.as_str())), ("targets", Json::from(vec!["eu", "us"]))]))
    })?;
    println!("version {}, targets {}", version, plan.get("targets").unwrap_or(&Json::Null));
    flowsvc::sleep(Duration::from_secs(1))?;
    match flowsvc::wait_signal("approve", Some(Duration::from_secs(2)))? {
        Some(payload) => println!("approval: by {}", payload.get("by").and_then(Json::as_str).unwrap_or("?")),
        None => println!("approval: timed out"),
    }
    Ok(())
}
