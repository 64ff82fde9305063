package flowsvc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ProtocolVersion is the socket protocol version this SDK speaks.
const ProtocolVersion = 2

// StepOutputLimit is the most stdout a step record keeps (2 MiB); past that the step is recorded as failed.
const StepOutputLimit = 2 * 1024 * 1024

var requestIDs int64

// field is one request field; fields are written in the order given, as the protocol transcript records them.
type field struct {
	key   string
	value any // string, int, bool, json.RawMessage (written as is); nil leaves the field out
}

// conn is one connection to the agent: a JSON line out, a JSON line back, as often as needed.
type conn struct {
	c        net.Conn
	r        *bufio.Reader
	protocol int
}

func dial(ctx context.Context) (*conn, error) {
	path := os.Getenv("FLOW_AGENT_SOCKET")
	if path == "" {
		return nil, &Error{Code: "no_agent_socket", Message: "FLOW_AGENT_SOCKET is not set"}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, &Error{Code: "agent_unreachable", Message: fmt.Sprintf("cannot connect to the agent at %s: %v", path, err)}
	}
	return &conn{c: c, r: bufio.NewReaderSize(c, 64*1024)}, nil
}

func (c *conn) close() { _ = c.c.Close() }

// hello asks the agent's protocol version (once per connection).
func (c *conn) hello(ctx context.Context) (int, error) {
	if c.protocol != 0 {
		return c.protocol, nil
	}
	answer, err := c.call(ctx, "hello")
	if err != nil {
		return 0, err
	}
	version := 1
	if n, ok := intField(answer, "protocol"); ok {
		version = n
	} else if n, ok := intField(answer, "v"); ok {
		version = n
	}
	c.protocol = version
	return version, nil
}

// call sends one request and returns its answer; an `ok:false` answer is an *Error. It waits without
// a time limit (a call that parks the run is never answered) unless ctx ends first.
func (c *conn) call(ctx context.Context, op string, fields ...field) (map[string]json.RawMessage, error) {
	line := encodeRequest(op, fields, atomic.AddInt64(&requestIDs, 1))
	stop := c.watch(ctx)
	defer stop()
	if _, err := c.c.Write(line); err != nil {
		return nil, c.lost(ctx, err)
	}
	text, err := c.r.ReadBytes('\n')
	if err != nil {
		if len(text) == 0 && ctx.Err() == nil {
			return nil, &Error{Code: "agent_closed", Message: "the agent closed the connection without answering"}
		}
		return nil, c.lost(ctx, err)
	}
	var answer map[string]json.RawMessage
	if json.Unmarshal(text, &answer) != nil || answer == nil {
		return nil, &Error{Code: "malformed_answer", Message: "the agent's answer is not a JSON object"}
	}
	if !isTrue(answer["ok"]) {
		return nil, refusal(answer, op)
	}
	return answer, nil
}

// watch ends a blocked read or write when ctx ends.
func (c *conn) watch(ctx context.Context) func() {
	if ctx.Done() == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = c.c.SetDeadline(time.Unix(1, 0))
		case <-done:
		}
	}()
	return func() { close(done) }
}

func (c *conn) lost(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &Error{Code: "agent_closed", Message: fmt.Sprintf("lost the connection to the agent: %v", err)}
}

func refusal(answer map[string]json.RawMessage, op string) *Error {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(answer["error"], &e)
	out := &Error{Code: e.Code, Message: e.Message}
	if out.Code == "" {
		out.Code = "agent_error"
	}
	if out.Message == "" {
		out.Message = fmt.Sprintf("the agent refused the %s call", op)
	}
	out.Exit, _ = intField(answer, "exit")
	return out
}

// encodeRequest makes one request line: {"v":2,"id":N,"op":op, ...fields} as JSON.stringify writes it.
func encodeRequest(op string, fields []field, id int64) []byte {
	var b bytes.Buffer
	b.WriteString(`{"v":2,"id":`)
	b.WriteString(strconv.FormatInt(id, 10))
	b.WriteString(`,"op":`)
	writeString(&b, op)
	for _, f := range fields {
		if f.value == nil {
			continue
		}
		b.WriteByte(',')
		writeString(&b, f.key)
		b.WriteByte(':')
		switch v := f.value.(type) {
		case string:
			writeString(&b, v)
		case int:
			b.WriteString(strconv.Itoa(v))
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case json.RawMessage:
			b.Write(v)
		default:
			panic(fmt.Sprintf("flowsvc: request field %s has type %T", f.key, v))
		}
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// writeString writes s as a JSON string the way JSON.stringify does: quote, backslash and control
// characters below U+0020 escaped, everything else (U+007F, U+2028, non-ASCII) as is.
func writeString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteString(`\ufffd`)
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}

// encodeValue is a user value (a payload, a state value, a StepFn result) as compact JSON text, as
// JSON.stringify writes it: encoding/json without its HTML escaping, and U+2028/U+2029 left as is.
// A json.RawMessage keeps its own key order.
func encodeValue(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return unescapeLineSeparators(bytes.TrimRight(b.Bytes(), "\n")), nil
}

// unescapeLineSeparators turns the \u2028 and \u2029 escapes encoding/json writes inside strings
// back into the characters.
func unescapeLineSeparators(text []byte) []byte {
	if !bytes.Contains(text, []byte(`\u202`)) {
		return text
	}
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' || i+1 >= len(text) {
			out = append(out, text[i])
			continue
		}
		if text[i+1] == 'u' && i+5 < len(text) && (string(text[i+2:i+6]) == "2028" || string(text[i+2:i+6]) == "2029") {
			out = utf8.AppendRune(out, rune(0x2028+int(text[i+5]-'8'))) // U+2028 or U+2029
			i += 5
			continue
		}
		out = append(out, text[i], text[i+1]) // any other escape, kept whole: \\ stays two bytes
		i++
	}
	return out
}

func isTrue(raw json.RawMessage) bool { return string(raw) == "true" }

func intField(answer map[string]json.RawMessage, key string) (int, bool) {
	raw, ok := answer[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(raw))
	return n, err == nil
}

func stringField(answer map[string]json.RawMessage, key string) (string, bool) {
	var s string
	if raw, ok := answer[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return "", false
}

func stdoutBytes(answer map[string]json.RawMessage) ([]byte, error) {
	data, _ := stringField(answer, "stdout_b64")
	out, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, &Error{Code: "malformed_answer", Message: "the agent's stdout_b64 is not base64"}
	}
	return out, nil
}

func stdoutText(answer map[string]json.RawMessage) (string, error) {
	b, err := stdoutBytes(answer)
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD"))), err
}

// stderrMessage is the agent's stderr text without its "error: " prefix.
func stderrMessage(answer map[string]json.RawMessage) string {
	text, _ := stringField(answer, "stderr")
	text = string(bytes.TrimSpace([]byte(text)))
	if len(text) > 7 && text[:7] == "error: " {
		return text[7:]
	}
	return text
}

// jsonOrText is text as a JSON value: itself when it is JSON, else a JSON string of it.
func jsonOrText(text string) json.RawMessage {
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	out, _ := encodeValue(text)
	return out
}
