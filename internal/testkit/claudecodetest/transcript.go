package claudecodetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"
)

// Transcript writes a synthetic Claude Code transcript, record by record, in
// the shape the CLI writes (see testdata/claude-code/README.md). It builds plain maps
// and encodes them with encoding/json, independently of the importer.
type Transcript struct {
	SessionID string
	agentID   string
	sidechain bool
	w         *writer
}

type writer struct {
	tb     testing.TB
	buf    bytes.Buffer
	n      int
	clock  time.Time
	parent string
}

// Fields are extra top-level keys of a record.
type Fields map[string]any

// Usage is an assistant record's message.usage.
type Usage struct {
	Input, CacheCreation, CacheRead, Output int64
}

// Total is what the usage says the context holds after the response.
func (u Usage) Total() int64 { return u.Input + u.CacheCreation + u.CacheRead + u.Output }

// NewTranscript starts an empty transcript of a session.
func NewTranscript(tb testing.TB, sessionID string) *Transcript {
	return &Transcript{SessionID: sessionID, w: &writer{tb: tb, clock: time.Date(2026, 2, 10, 21, 0, 0, 0, time.UTC)}}
}

// Agent returns a writer of sub-agent (isSidechain) records into the same
// transcript; agentID "" writes no agentId.
func (t *Transcript) Agent(agentID string) *Transcript {
	return &Transcript{SessionID: t.SessionID, agentID: agentID, sidechain: true, w: t.w}
}

// Bytes is the transcript so far.
func (t *Transcript) Bytes() []byte { return t.w.buf.Bytes() }

// Reader reads the transcript so far.
func (t *Transcript) Reader() io.Reader { return bytes.NewReader(t.w.buf.Bytes()) }

// Record appends a record, filling uuid, parentUuid, sessionId, isSidechain,
// agentId and timestamp unless fields sets them, and returns its uuid.
func (t *Transcript) Record(fields Fields) string {
	t.w.n++
	t.w.clock = t.w.clock.Add(time.Second)
	rec := Fields{
		"uuid":        fmt.Sprintf("00000000-0000-4000-8000-%012d", t.w.n),
		"parentUuid":  nilIfEmpty(t.w.parent),
		"sessionId":   t.SessionID,
		"isSidechain": t.sidechain,
		"userType":    "external",
		"timestamp":   t.w.clock.Format("2006-01-02T15:04:05.000Z"),
	}
	if t.agentID != "" {
		rec["agentId"] = t.agentID
	}
	for k, v := range fields {
		rec[k] = v
	}
	data, err := json.Marshal(rec)
	if err != nil {
		t.w.tb.Fatalf("claudecodetest: encode record: %v", err)
	}
	t.w.buf.Write(data)
	t.w.buf.WriteByte('\n')
	id, _ := rec["uuid"].(string)
	t.w.parent = id
	return id
}

// Raw appends a line as is.
func (t *Transcript) Raw(line string) {
	t.w.buf.WriteString(line)
	t.w.buf.WriteByte('\n')
}

// User appends a user record; content is a string or a slice of blocks.
func (t *Transcript) User(content any, extra ...Fields) string {
	f := Fields{"type": "user", "message": map[string]any{"role": "user", "content": content}}
	for _, e := range extra {
		for k, v := range e {
			f[k] = v
		}
	}
	return t.Record(f)
}

// ToolResult appends a user record holding one tool_result block.
func (t *Transcript) ToolResult(toolUseID string, content any) string {
	return t.User([]any{map[string]any{"type": "tool_result", "tool_use_id": toolUseID, "content": content}})
}

// Assistant appends one record of an API response: one block and the usage
// as the CLI had it when writing the record. stop_reason is null, as in the
// CLI's transcripts.
func (t *Transcript) Assistant(msgID, model string, u Usage, block map[string]any) string {
	return t.Record(Fields{"type": "assistant", "requestId": "req_" + msgID, "message": map[string]any{
		"model": model, "id": msgID, "type": "message", "role": "assistant",
		"content": []any{block}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": u.Input, "cache_creation_input_tokens": u.CacheCreation,
			"cache_read_input_tokens": u.CacheRead, "output_tokens": u.Output,
			"service_tier": "standard",
		},
	}})
}

// Boundary appends a system compact_boundary record.
func (t *Transcript) Boundary(trigger string, preTokens int64) string {
	last := t.w.parent
	t.w.parent = ""
	return t.Record(Fields{
		"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
		"level": "info", "logicalParentUuid": last, "isMeta": false,
		"compactMetadata": map[string]any{"trigger": trigger, "preTokens": preTokens},
	})
}

// CompactSummary appends the user record holding a compaction's summary.
func (t *Transcript) CompactSummary(text string) string {
	return t.User(text, Fields{"isCompactSummary": true, "isVisibleInTranscriptOnly": true})
}

// Progress appends a progress record, which importers skip.
func (t *Transcript) Progress() string {
	return t.Record(Fields{"type": "progress", "data": map[string]any{"type": "hook_progress", "hookEvent": "PreToolUse"}})
}

// Text is a text block.
func Text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// Thinking is a thinking block with a signature.
func Thinking(s string) map[string]any {
	return map[string]any{"type": "thinking", "thinking": s, "signature": "c2lnbmF0dXJl"}
}

// ToolUse is a tool_use block.
func ToolUse(id, name string, input map[string]any) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": input, "caller": map[string]any{"type": "direct"}}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
