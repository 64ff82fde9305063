# Runs the Rust example's binary (built beforehand on the agent host, see src/main.rs) as the run's
# script: `flow submit examples/rust/durable.sh`; the agent user's HOME holds the binary.
exec "$HOME/flowsvc-examples/flowsvc-durable-example"
