package flowsvc

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// ErrCallFailed matches the error of a call whose child run failed or was cancelled.
var ErrCallFailed = &Error{Code: "call_failed"}

// CallNode runs one node of kind with config (a JSON object; nil: none) as a child run, waits for it
// and returns the node's output as JSON (`flow call node <kind> --config <json>`). The run parks
// until the child ends; the call is checkpointed by position, so a replay returns the recorded
// output and starts no child. A failed or cancelled child is an *Error with Code "call_failed"
// (errors.Is(err, ErrCallFailed)), Exit 1 and the child's error as Message.
func CallNode(ctx context.Context, kind string, config any) (json.RawMessage, error) {
	if kind == "" {
		return nil, invalid(2, "CallNode's kind must be a non-empty string")
	}
	body, err := callValue("config", config)
	if err != nil {
		return nil, err
	}
	if body != nil && !bytes.HasPrefix(body.(json.RawMessage), []byte("{")) {
		return nil, invalid(2, "CallNode's config must be a JSON object, got %s", body)
	}
	return callChild(ctx, field{"node", kind}, field{"config", body})
}

// CallGraph runs the stored graph name with input (a JSON-serialisable value; nil: none) as a child
// run and returns its output as JSON (`flow call graph <name> --input <json>`); as CallNode otherwise.
func CallGraph(ctx context.Context, name string, input any) (json.RawMessage, error) {
	if name == "" {
		return nil, invalid(2, "CallGraph's name must be a non-empty string")
	}
	body, err := callValue("input", input)
	if err != nil {
		return nil, err
	}
	return callChild(ctx, field{"graph", name}, field{"input", body})
}

// CallDefinition runs a graph document (its JSON text) with input as a child run and returns its
// output as JSON (`flow call graph --definition <file> --input <json>`); the server checks it as any
// submitted graph. As CallNode otherwise.
func CallDefinition(ctx context.Context, definition []byte, input any) (json.RawMessage, error) {
	if len(definition) == 0 {
		return nil, invalid(2, "CallDefinition's document must not be empty")
	}
	body, err := callValue("input", input)
	if err != nil {
		return nil, err
	}
	return callChild(ctx, field{"definition_b64", base64.StdEncoding.EncodeToString(definition)}, field{"input", body})
}

// callValue is v as a request field: nil (left out) for nil, else its JSON.
func callValue(what string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	text, err := encodeValue(v)
	if err != nil {
		return nil, invalid(2, "the %s is not JSON-serialisable: %v", what, err)
	}
	if string(text) == "null" {
		return nil, nil
	}
	return text, nil
}

func callChild(ctx context.Context, fields ...field) (json.RawMessage, error) {
	c, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.close()
	answer, err := c.call(ctx, "call", fields...)
	if err != nil {
		return nil, err
	}
	if exit, _ := intField(answer, "exit"); exit != 0 {
		message := strings.TrimPrefix(stderrMessage(answer), "flow: call: ")
		if message == "" {
			message = fmt.Sprintf("the called run failed (exit code %d)", exit)
		}
		return nil, &Error{Code: "call_failed", Message: message, Exit: exit}
	}
	text, err := stdoutText(answer)
	if err != nil {
		return nil, err
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return json.RawMessage("null"), nil
	}
	return jsonOrText(text), nil
}
