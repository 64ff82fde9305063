// Test support: makes one SDK call of the protocol transcript with the Go SDK
// (agent-image/sdk/go) and prints what came of it as one line of JSON: {"returns": value} or
// {"throws": {code, exit, message}}. Built once by agent-image/src/protocol/transcript-sdk.test.ts,
// run as `sdk-driver '<SdkCall JSON>'` with FLOW_AGENT_SOCKET set; sdk_driver.py is the same for
// the Python SDK (the call names are the TypeScript ones).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	flowsvc "flowsvc.dev/sdk"
)

type sdkCall struct {
	Call    string                     `json:"call"`
	Args    []json.RawMessage          `json:"args"`
	Options map[string]json.RawMessage `json:"options"`
	Fn      map[string]json.RawMessage `json:"fn"`
}

func text(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func (c sdkCall) arg(i int) json.RawMessage {
	if i < len(c.Args) {
		return c.Args[i]
	}
	return nil
}

// rawOrNil is an optional argument: nil (none) when absent.
func rawOrNil(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	return raw
}

func (c sdkCall) opts() []flowsvc.Option {
	var out []flowsvc.Option
	if raw, ok := c.Options["label"]; ok {
		out = append(out, flowsvc.Label(text(raw)))
	}
	if raw, ok := c.Options["key"]; ok {
		out = append(out, flowsvc.Key(text(raw)))
	}
	if raw, ok := c.Options["entity"]; ok {
		out = append(out, flowsvc.Entity(text(raw)))
	}
	return out
}

// seconds is a transcript duration: humantime text as Go reads it, or a number of seconds.
func seconds(raw json.RawMessage) time.Duration {
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return time.Duration(n * float64(time.Second))
	}
	d, err := time.ParseDuration(text(raw))
	if err != nil {
		panic(err)
	}
	return d
}

func (c sdkCall) fn(ctx context.Context) (json.RawMessage, error) {
	if raw, ok := c.Fn["throws"]; ok {
		return nil, errors.New(text(raw))
	}
	if raw, ok := c.Fn["returns"]; ok {
		return raw, nil
	}
	return json.RawMessage("null"), nil
}

func run(ctx context.Context, c sdkCall) (any, error) {
	switch c.Call {
	case "step":
		var cmd []string
		_ = json.Unmarshal(c.arg(1), &cmd)
		return flowsvc.Step(ctx, text(c.arg(0)), cmd, c.opts()...)
	case "stepFn":
		return flowsvc.StepFn(ctx, text(c.arg(0)), c.fn, c.opts()...)
	case "sleep":
		if s := text(c.arg(0)); s != "" {
			return nil, flowsvc.SleepText(ctx, s)
		}
		return nil, flowsvc.Sleep(ctx, seconds(c.arg(0)))
	case "waitSignal":
		var timeout time.Duration
		if raw, ok := c.Options["timeout"]; ok {
			timeout = seconds(raw)
		}
		value, ok, err := flowsvc.WaitSignal(ctx, text(c.arg(0)), timeout)
		if !ok {
			return nil, err
		}
		return value, err
	case "emit":
		var payload any
		if raw := c.arg(1); raw != nil {
			payload = raw
		}
		return flowsvc.Emit(ctx, text(c.arg(0)), payload, c.opts()...)
	case "callNode":
		return flowsvc.CallNode(ctx, text(c.arg(0)), rawOrNil(c.arg(1)))
	case "callGraph":
		return flowsvc.CallGraph(ctx, text(c.arg(0)), rawOrNil(c.arg(1)))
	case "callDefinition":
		return flowsvc.CallDefinition(ctx, []byte(text(c.arg(0))), rawOrNil(c.arg(1)))
	default:
		return runState(ctx, c)
	}
}

func runState(ctx context.Context, c sdkCall) (any, error) {
	switch c.Call {
	case "state.get":
		value, ok, err := flowsvc.StateGet(ctx, text(c.arg(0)), c.opts()...)
		if !ok {
			return nil, err
		}
		return value, err
	case "state.set":
		return nil, flowsvc.StateSet(ctx, text(c.arg(0)), c.arg(1), c.opts()...)
	case "state.delete":
		return nil, flowsvc.StateDelete(ctx, text(c.arg(0)), c.opts()...)
	case "state.list":
		return flowsvc.StateList(ctx, c.opts()...)
	}
	panic("the driver has no SDK call " + c.Call)
}

func main() {
	var c sdkCall
	if err := json.Unmarshal([]byte(os.Args[1]), &c); err != nil {
		panic(err)
	}
	value, err := run(context.Background(), c)
	var out any = map[string]any{"returns": value}
	var fe *flowsvc.Error
	if errors.As(err, &fe) {
		thrown := map[string]any{"code": fe.Code, "message": fe.Message}
		if fe.Exit != 0 {
			thrown["exit"] = fe.Exit
		}
		out = map[string]any{"throws": thrown}
	} else if err != nil {
		panic(err)
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
