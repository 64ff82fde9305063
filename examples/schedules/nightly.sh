#!/usr/bin/env bash
# A nightly job, run by the server on a schedule:
#
#   flow schedule set nightly examples/schedules/nightly.sh --cron '0 2 * * *' --tz Europe/Berlin
#   flow schedule ls                     # name, cron, zone, next run, paused
#   flow runs ls --tag schedule:nightly  # the runs it started
#
# Each tick records a `schedule.tick` event on the bus and starts one run of this script with:
#   $CI_TRIGGER_EVENT      schedule.tick (manual when you `flow submit` it by hand)
#   $CI_TRIGGER_SCHEDULE   the schedule's id (sch-...)
#   $CI_TRIGGER_EVENT_ID   the tick's bus id (evt-...)
#   $FLOW_INPUT_FILE       the tick's envelope: {"type", "event", "schedule", "payload": {"schedule_id",
#                          "name", "scheduled_at", "run_id"}}
# A server that was down over several ticks runs it once when it is back, not once per missed tick.

# The time this tick was due (plain shell: the agent may have no jq).
scheduled_at=""
if [ -s "${FLOW_INPUT_FILE:-}" ]; then
  scheduled_at=$(grep -o '"scheduled_at"[[:space:]]*:[[:space:]]*"[^"]*"' "$FLOW_INPUT_FILE" | sed -e 's/^.*:[[:space:]]*"//' -e 's/"$//' || true)
fi
echo "nightly: ${CI_TRIGGER_EVENT:-manual} of schedule ${CI_TRIGGER_SCHEDULE:--} due at ${scheduled_at:-now}"

# A step runs once per run, even when the run is replayed after a crash. Put the real work here.
flow step prune -- echo "pruning build caches older than 30 days"
flow output set schedule="${CI_TRIGGER_SCHEDULE:-}" trigger="${CI_TRIGGER_EVENT:-manual}" scheduled_at="${scheduled_at}"
