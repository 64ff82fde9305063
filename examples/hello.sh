# The smallest flowsvc script. Plain shell runs on every pass; `flow step` runs once and is recorded.
#   npx flow submit examples/hello.sh --follow
echo "hello from flowsvc (run $FLOW_WORKFLOW_ID)"
greeting=$(flow step greet -- echo "hello, durable world")
echo "the step said: $greeting"
flow output set greeting="$greeting"
