// A durable Go script: two steps, a sleep and a bounded wait for an approval signal.
//
//	npx flow submit examples/go/durable.go --follow
//
// `.go` runs under `go run` on the agent host; the SDK is imported as flowsvc.dev/sdk (see
// agent-image/sdk/go/README.md for putting it where `go run` finds it). The sleep parks the run and
// the script is replayed from the top: the steps return their records without running again.
// Answer the wait with `flow signal <run> approve --payload '{"by":"ann"}'` within 2 seconds, or it
// times out.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	flowsvc "flowsvc.dev/sdk"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	fmt.Println("pass starts")
	version, err := flowsvc.Step(ctx, "version", []string{"sh", "-c", "echo building >&2; echo 1.4.2"})
	if err != nil {
		return err
	}
	version = strings.TrimSpace(version)
	plan, err := flowsvc.StepFn(ctx, "plan", func(context.Context) (map[string]any, error) {
		fmt.Fprintln(os.Stderr, "planning")
		return map[string]any{"version": version, "targets": []string{"eu", "us"}}, nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("version %s, targets %v\n", version, plan["targets"])
	if err := flowsvc.Sleep(ctx, time.Second); err != nil {
		return err
	}
	payload, ok, err := flowsvc.WaitSignal(ctx, "approve", 2*time.Second)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Println("approval: timed out")
		return nil
	}
	var approval struct {
		By string `json:"by"`
	}
	_ = json.Unmarshal(payload, &approval)
	fmt.Println("approval: by", approval.By)
	return nil
}
