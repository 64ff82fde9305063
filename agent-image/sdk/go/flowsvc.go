// Package flowsvc gives Go scripts run by flowsvc its durable primitives: steps, sleeps, signal
// waits, events and state, over the agent's Unix socket (FLOW_AGENT_SOCKET, socket protocol v2:
// one JSON line each way). Standard library only.
//
//	version, err := flowsvc.Step(ctx, "version", []string{"git", "rev-parse", "HEAD"})
//	err = flowsvc.Sleep(ctx, 10*time.Minute)
//	payload, ok, err := flowsvc.WaitSignal(ctx, "approve", time.Hour) // ok == false: timed out
//
// Every durable call is recorded by position: when the run is replayed (after a sleep, a wait, an
// agent restart) each call returns its recorded result instead of running again, so a script must
// make the same durable calls in the same order on every pass. When the run must park, the agent
// does not answer: it ends the script's process group and replays the script later. A call simply
// blocks on the socket until then (or until its context ends).
package flowsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Error is a call the agent refused (its `ok:false` answer), one the SDK refused before sending, or
// a failed step. Code is a short machine-readable word ("invalid_argument", "determinism",
// "no_agent_socket", "step_failed", ...); Exit is the exit status the agent asked for (0: none),
// for a failed step its exit code; Stdout is a failed step's recorded stdout.
type Error struct {
	Code    string
	Message string
	Exit    int
	Stdout  string
}

func (e *Error) Error() string { return e.Message }

// Is matches an *Error of the same Code that has no Message (the Err* values), for errors.Is.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Errors to test for with errors.Is.
var (
	ErrStepFailed          = &Error{Code: "step_failed"}
	ErrDeterminism         = &Error{Code: "determinism"}
	ErrUnsupportedProtocol = &Error{Code: "unsupported_protocol"}
	ErrInvalidArgument     = &Error{Code: "invalid_argument"}
	ErrNoAgentSocket       = &Error{Code: "no_agent_socket"}
)

func stepFailed(exit int, stdout, message string) *Error {
	if message == "" {
		message = fmt.Sprintf("step failed with exit code %d", exit)
	}
	return &Error{Code: "step_failed", Message: message, Exit: exit, Stdout: stdout}
}

func invalid(exit int, format string, args ...any) *Error {
	return &Error{Code: "invalid_argument", Message: fmt.Sprintf(format, args...), Exit: exit}
}

// Option sets an optional argument of a call: Label for steps, Key for Emit, Entity for state.
type Option func(*options)

type options struct {
	label  string
	key    string
	entity string
}

// Label is a step's display text (the name plus its ordinal identifies the step).
func Label(text string) Option { return func(o *options) { o.label = text } }

// Key is an emitted event's subject.
func Key(subject string) Option { return func(o *options) { o.key = subject } }

// Entity makes a state call project-wide under the entity's name instead of private to the run.
func Entity(name string) Option { return func(o *options) { o.entity = name } }

func collect(opts []Option) options {
	var o options
	for _, set := range opts {
		set(&o)
	}
	return o
}

// optional is s as a request field value, nil (left out) when empty.
func optional(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ---- durations ---------------------------------------------------------------------------------

// DurationText is d as the agent takes it (humantime), in its largest whole unit: 30d, 2h, 5m, 10s,
// else milliseconds (1.5s is "1500ms"; below a millisecond rounds to the nearest one).
func DurationText(d time.Duration) (string, error) {
	if d < 0 {
		return "", invalid(2, "a duration must be zero or more, got %s", d)
	}
	ms := int64((d + time.Millisecond/2) / time.Millisecond)
	units := []struct {
		ms     int64
		suffix string
	}{{86_400_000, "d"}, {3_600_000, "h"}, {60_000, "m"}, {1000, "s"}}
	for _, u := range units {
		if ms > 0 && ms%u.ms == 0 {
			return fmt.Sprintf("%d%s", ms/u.ms, u.suffix), nil
		}
	}
	return fmt.Sprintf("%dms", ms), nil
}

// ---- sleep and waits ---------------------------------------------------------------------------

// Sleep is a durable sleep: the run parks (the agent slot is freed) and the script is replayed from
// the top once the timer fired; on that pass Sleep returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	text, err := DurationText(d)
	if err != nil {
		return err
	}
	return SleepText(ctx, text)
}

// SleepText is Sleep with humantime text as the agent takes it ("5s", "1m", "2h", "30d").
func SleepText(ctx context.Context, duration string) error {
	if strings.TrimSpace(duration) == "" {
		return invalid(2, "a duration is empty")
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	_, err = c.call(ctx, "sleep", field{"duration", strings.TrimSpace(duration)})
	return err
}

// WaitSignal waits for the next signal named name sent to this run (`flow signal <run> <name>
// --payload <json>`) and returns its payload as JSON (`null` for a signal without one) and ok true.
// A timeout above zero bounds the wait: when it passes, WaitSignal returns (nil, false, nil); the
// outcome is recorded, so a replay takes the same branch. A bounded wait needs an agent that speaks
// socket protocol v2 (else ErrUnsupportedProtocol). Names starting "event:" are refused.
func WaitSignal(ctx context.Context, name string, timeout time.Duration) (json.RawMessage, bool, error) {
	if name == "" {
		return nil, false, invalid(0, "WaitSignal needs a non-empty signal name")
	}
	if strings.HasPrefix(name, "event:") {
		return nil, false, invalid(2, "signal names starting \"event:\" are refused: %q names an event, not a signal", name)
	}
	var timeoutText any
	if timeout > 0 {
		text, err := DurationText(timeout)
		if err != nil {
			return nil, false, err
		}
		timeoutText = text
	}
	c, err := dial(ctx)
	if err != nil {
		return nil, false, err
	}
	defer c.close()
	if timeoutText != nil {
		if err := requireV2(ctx, c); err != nil {
			return nil, false, err
		}
	}
	answer, err := c.call(ctx, "wait-signal", field{"name", name}, field{"timeout", timeoutText})
	if err != nil {
		return nil, false, err
	}
	return waitOutcome(answer, name)
}

func requireV2(ctx context.Context, c *conn) error {
	version, err := c.hello(ctx)
	if err != nil {
		return err
	}
	if version < ProtocolVersion {
		return &Error{
			Code:    "unsupported_protocol",
			Message: fmt.Sprintf("bounded waits need an agent that speaks socket protocol v2 (this agent speaks v%d)", version),
		}
	}
	return nil
}

func waitOutcome(answer map[string]json.RawMessage, name string) (json.RawMessage, bool, error) {
	exit, _ := intField(answer, "exit")
	if exit == 124 {
		return nil, false, nil
	}
	if exit != 0 {
		message := stderrMessage(answer)
		if message == "" {
			message = fmt.Sprintf("WaitSignal %q failed with exit code %d", name, exit)
		}
		return nil, false, &Error{Code: "wait_failed", Message: message, Exit: exit}
	}
	text, err := stdoutText(answer)
	if err != nil {
		return nil, false, err
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return json.RawMessage("null"), true, nil
	}
	return jsonOrText(text), true, nil
}

// ---- events ------------------------------------------------------------------------------------

var eventType = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Emit emits an event of typ with a JSON-serialisable payload (nil: none) and returns its id. It is
// checkpointed by position: a replay returns the same id. A type that is not 1-64 of
// [A-Za-z0-9._-] is refused before anything is sent. Key(subject) sets the event's subject.
func Emit(ctx context.Context, typ string, payload any, opts ...Option) (string, error) {
	if typ == "" {
		return "", invalid(2, "Emit needs a non-empty event type")
	}
	if !eventType.MatchString(typ) {
		return "", invalid(2, "an event type is 1-64 characters from [A-Za-z0-9._-], got %s", typ)
	}
	var body any
	if payload != nil {
		text, err := encodeValue(payload)
		if err != nil {
			return "", invalid(0, "the payload of %s is not JSON-serialisable: %v", typ, err)
		}
		body = text
	}
	o := collect(opts)
	c, err := dial(ctx)
	if err != nil {
		return "", err
	}
	defer c.close()
	answer, err := c.call(ctx, "emit", field{"type", typ}, field{"key", optional(o.key)}, field{"payload", body})
	if err != nil {
		return "", err
	}
	if id, ok := stringField(answer, "event_id"); ok && id != "" {
		return id, nil
	}
	text, err := stdoutText(answer)
	return strings.TrimSpace(text), err
}

// ---- state -------------------------------------------------------------------------------------

// Key-value state: private to the run, or project-wide under Entity(name). Not checkpointed: every
// replay pass reads and writes the current value.

func stateCall(ctx context.Context, action, key string, value any, opts []Option) (map[string]json.RawMessage, error) {
	o := collect(opts)
	c, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.close()
	return c.call(ctx, "state", field{"action", action}, field{"key", optional(key)}, field{"entity", optional(o.entity)}, field{"value", value})
}

// StateGet returns a key's value as JSON and ok true, or ok false when the key is unset.
func StateGet(ctx context.Context, key string, opts ...Option) (json.RawMessage, bool, error) {
	answer, err := stateCall(ctx, "get", key, nil, opts)
	if err != nil {
		return nil, false, err
	}
	if found, ok := answer["found"]; ok {
		if !isTrue(found) {
			return nil, false, nil
		}
		return answer["value"], true, nil
	}
	text, err := stdoutText(answer)
	if err != nil || text == "" {
		return nil, false, err
	}
	return jsonOrText(strings.TrimSuffix(text, "\n")), true, nil
}

// StateSet stores a JSON-serialisable value.
func StateSet(ctx context.Context, key string, value any, opts ...Option) error {
	text, err := encodeValue(value)
	if err != nil {
		return invalid(0, "the value of %s is not JSON-serialisable: %v", key, err)
	}
	_, err = stateCall(ctx, "set", key, string(text), opts)
	return err
}

// StateDelete removes a key.
func StateDelete(ctx context.Context, key string, opts ...Option) error {
	_, err := stateCall(ctx, "delete", key, nil, opts)
	return err
}

// StateList returns every key and its value as JSON.
func StateList(ctx context.Context, opts ...Option) (map[string]json.RawMessage, error) {
	answer, err := stateCall(ctx, "list", "", nil, opts)
	if err != nil {
		return nil, err
	}
	var items []struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	out := map[string]json.RawMessage{}
	if raw, ok := answer["items"]; ok && json.Unmarshal(raw, &items) == nil {
		for _, it := range items {
			out[it.Key] = it.Value
		}
		return out, nil
	}
	text, err := stdoutText(answer)
	for _, line := range strings.Split(text, "\n") {
		if k, v, found := strings.Cut(line, "\t"); found || line != "" {
			out[k] = jsonOrText(v)
		}
	}
	return out, err
}
