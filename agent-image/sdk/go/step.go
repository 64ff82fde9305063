package flowsvc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Step runs cmd once as a durable step and returns its stdout.
//
// The command runs without a shell (pass "sh", "-c", "..." for one) in the current directory with
// the script's environment minus every FLOW_* variable, plus FLOW_IDEMPOTENCY_KEY (the same on every
// replay); its stdin and stderr are the script's. Its stdout is returned, not echoed. A non-zero
// exit is an *Error with Code "step_failed" (errors.Is(err, ErrStepFailed)), Exit the exit code and
// Stdout the output. On replay the command does not run: the record is returned (or its failure).
func Step(ctx context.Context, name string, cmd []string, opts ...Option) (string, error) {
	if len(cmd) == 0 {
		return "", invalid(0, "Step takes the command as a non-empty list of words, e.g. []string{\"make\", \"all\"}")
	}
	c, answer, err := begin(ctx, name, opts)
	if err != nil {
		return "", err
	}
	defer c.close()
	if isTrue(answer["replay"]) {
		return replayed(answer)
	}
	key, _ := stringField(answer, "idempotency_key")
	exit, kept, total := runBody(ctx, cmd, key)
	if err := complete(ctx, c, answer["position"], exit, kept, total); err != nil {
		return "", err
	}
	stdout := strings.ToValidUTF8(string(kept), "\uFFFD")
	if exit != 0 {
		return "", stepFailed(exit, stdout, "")
	}
	return stdout, nil
}

// StepFn runs fn once as a durable step and returns its result as it reads back from JSON.
//
// The result is recorded as JSON text (exit 0) and decoded into a T again on every pass, the first
// one too, so the script sees the same value whether the step ran or replayed. When fn returns an
// error (or a result that is not JSON-serialisable) the step is recorded as failed (exit 1, the
// error's text as its stdout) and an ErrStepFailed error is returned; a replay returns the same
// failure without calling fn.
func StepFn[T any](ctx context.Context, name string, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	var zero T
	c, answer, err := begin(ctx, name, opts)
	if err != nil {
		return zero, err
	}
	defer c.close()
	if isTrue(answer["replay"]) {
		text, err := replayed(answer)
		if err != nil {
			return zero, err
		}
		return decodeResult[T](name, text)
	}
	text, exit := fnResult(ctx, name, fn)
	data := []byte(text)
	kept := data
	if len(kept) > StepOutputLimit {
		kept = kept[:StepOutputLimit]
	}
	if err := complete(ctx, c, answer["position"], exit, kept, len(data)); err != nil {
		return zero, err
	}
	if exit != 0 {
		return zero, stepFailed(exit, text, "")
	}
	return decodeResult[T](name, text)
}

func fnResult[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) (string, int) {
	value, err := fn(ctx)
	if err != nil {
		return err.Error(), 1
	}
	text, err := encodeValue(value)
	if err != nil {
		return fmt.Sprintf("StepFn %q returned a value that is not JSON-serialisable: %v", name, err), 1
	}
	return string(text), 0
}

func decodeResult[T any](name, text string) (T, error) {
	var out T
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return out, &Error{Code: "malformed_record", Message: fmt.Sprintf("the record of step %q does not decode into %T: %v", name, out, err)}
	}
	return out, nil
}

// begin opens the connection of a step and asks the agent for its record or a position.
func begin(ctx context.Context, name string, opts []Option) (*conn, map[string]json.RawMessage, error) {
	if name == "" {
		return nil, nil, invalid(0, "a step needs a non-empty name")
	}
	c, err := dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	answer, err := c.call(ctx, "step", field{"name", name}, field{"label", optional(collect(opts).label)})
	if err == nil && !isTrue(answer["replay"]) {
		if _, ok := answer["position"]; !ok {
			err = &Error{Code: "malformed_answer", Message: "the agent's step answer has no position or idempotency_key"}
		} else if _, ok := stringField(answer, "idempotency_key"); !ok {
			err = &Error{Code: "malformed_answer", Message: "the agent's step answer has no position or idempotency_key"}
		}
	}
	if err != nil {
		c.close()
		return nil, nil, err
	}
	return c, answer, nil
}

// replayed is a replayed step's stdout, or its recorded failure.
func replayed(answer map[string]json.RawMessage) (string, error) {
	stdout, err := stdoutText(answer)
	if err != nil {
		return "", err
	}
	if exit, _ := intField(answer, "exit"); exit != 0 {
		return "", stepFailed(exit, stdout, stderrMessage(answer))
	}
	return stdout, nil
}

// complete records a new step's result; an over-limit output comes back as a recorded failure.
func complete(ctx context.Context, c *conn, position json.RawMessage, exit int, kept []byte, total int) error {
	var overflow any
	if total > StepOutputLimit {
		overflow = total
	}
	_, err := c.call(ctx, "step.complete",
		field{"position", position},
		field{"stdout_b64", base64.StdEncoding.EncodeToString(kept)},
		field{"exit", exit},
		field{"overflow_bytes", overflow})
	var e *Error
	if errors.As(err, &e) && e.Code == "step_output_too_large" {
		exit := e.Exit
		if exit == 0 {
			exit = 1
		}
		return stepFailed(exit, "", e.Message)
	}
	return err
}

func stepEnv(key string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLOW_") {
			env = append(env, kv)
		}
	}
	return append(env, "FLOW_IDEMPOTENCY_KEY="+key)
}

// runBody runs a step's command: its exit status (127 when not found, 128+n for signal n), the first
// StepOutputLimit bytes of its stdout and the whole count.
func runBody(ctx context.Context, argv []string, key string) (int, []byte, int) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = stepEnv(key)
	cmd.Stdin = os.Stdin
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return startFailure(argv[0], err), nil, 0
	}
	kept, total := readCapped(out)
	err = cmd.Wait()
	return exitStatus(cmd, err), kept, total
}

func startFailure(program string, err error) int {
	missing := program == "" || errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist)
	why := err.Error()
	if missing && !strings.Contains(program, "/") {
		why = "command not found"
	}
	fmt.Fprintf(os.Stderr, "flowsvc step: %s: %s\n", program, why)
	if missing {
		return 127
	}
	return 126
}

func readCapped(r io.Reader) ([]byte, int) {
	var kept []byte
	total := 0
	buf := make([]byte, 64*1024)
	for {
		n, err := r.Read(buf)
		total += n
		if room := StepOutputLimit - len(kept); room > 0 {
			if n < room {
				room = n
			}
			kept = append(kept, buf[:room]...)
		}
		if err != nil {
			return kept, total
		}
	}
}

func exitStatus(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	_ = err
	return 1
}
