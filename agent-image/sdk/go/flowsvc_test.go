package flowsvc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDurationText(t *testing.T) {
	cases := map[time.Duration]string{
		0:                       "0ms",
		1500 * time.Millisecond: "1500ms",
		90 * time.Second:        "90s",
		5 * time.Minute:         "5m",
		2 * time.Hour:           "2h",
		30 * 24 * time.Hour:     "30d",
		time.Microsecond * 1499: "1ms",
	}
	for d, want := range cases {
		if got, err := DurationText(d); err != nil || got != want {
			t.Errorf("DurationText(%v) = %q, %v; want %q", d, got, err, want)
		}
	}
	if _, err := DurationText(-time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a negative duration: %v", err)
	}
}

func TestEncodeValueWritesAsJSONStringify(t *testing.T) {
	got, err := encodeValue(map[string]any{"b": "<&>\u2028\u2029 \\u2028", "a": json.RawMessage(`{"z":1,"y":[true,null]}`)})
	want := `{"a":{"z":1,"y":[true,null]},"b":"<&>` + "\u2028\u2029" + ` \\u2028"}`
	if err != nil || string(got) != want {
		t.Errorf("encodeValue = %s, %v; want %s", got, err, want)
	}
	if _, err := encodeValue(map[string]any{"n": func() {}}); err == nil {
		t.Error("a function is not JSON")
	}
}

func TestRequestStringsAreEscapedAsJSONStringify(t *testing.T) {
	line := string(encodeRequest("step", []field{{"name", "é \"q\" \\ \x00\x1f\x7f\u2028 \xff"}, {"label", nil}}, 7))
	want := `{"v":2,"id":7,"op":"step","name":"é \"q\" \\ \u0000\u001f` + "\x7f\u2028" + ` \ufffd"}` + "\n"
	if line != want {
		t.Errorf("encodeRequest = %q; want %q", line, want)
	}
}

func TestRefusedBeforeAnythingIsSent(t *testing.T) {
	t.Setenv("FLOW_AGENT_SOCKET", "/nonexistent/agent.sock")
	ctx := context.Background()
	for _, typ := range []string{"", "deploy done", "tick\x00\n", "déploy", strings.Repeat("x", 65)} {
		if _, err := Emit(ctx, typ, nil); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Emit(%q): %v", typ, err)
		}
	}
	if _, _, err := WaitSignal(ctx, "event:deploy.done", 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("WaitSignal(event:...): %v", err)
	}
	if _, err := Step(ctx, "build", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Step without a command: %v", err)
	}
	if err := SleepText(ctx, "  "); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("SleepText of blanks: %v", err)
	}
	if _, err := CallNode(ctx, "", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CallNode without a kind: %v", err)
	}
	for _, config := range []any{[]int{1}, "text", 1e300, json.RawMessage(`[{"a":1}]`)} {
		if _, err := CallNode(ctx, "emit", config); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CallNode with config %v: %v", config, err)
		}
	}
	if _, err := CallGraph(ctx, "deploy", map[string]any{"f": func() {}}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CallGraph with an input that is not JSON: %v", err)
	}
	if _, err := CallGraph(ctx, "", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CallGraph without a name: %v", err)
	}
	if _, err := CallDefinition(ctx, nil, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CallDefinition without a document: %v", err)
	}
	if _, err := CallGraph(ctx, "deploy", nil); err == nil || errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CallGraph(deploy) is sent (and cannot reach the agent): %v", err)
	}
}

func TestWithoutTheAgentSocket(t *testing.T) {
	t.Setenv("FLOW_AGENT_SOCKET", "")
	_, err := Step(context.Background(), "build", []string{"true"})
	if !errors.Is(err, ErrNoAgentSocket) || err.Error() != "FLOW_AGENT_SOCKET is not set" {
		t.Errorf("Step without FLOW_AGENT_SOCKET: %v", err)
	}
}
