// Package claudecode imports Claude Code CLI transcripts (JSONL, one record a
// line): it keeps the conversation records, groups them into model API rounds
// and turns the rounds into mnemos.turn.v1 events.
package claudecode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Record types and the one system subtype the importer keeps.
const (
	TypeUser        = "user"
	TypeAssistant   = "assistant"
	TypeSystem      = "system"
	SubtypeBoundary = "compact_boundary"
	// KindCompactBoundary is Record.Kind of a system compact_boundary record.
	KindCompactBoundary = "compact_boundary"
)

// SyntheticModel is the model Claude Code writes on assistant messages it made
// up itself (API errors, "No response requested."): they are conversation
// content, not API responses.
const SyntheticModel = "<synthetic>"

// MaxLineBytes bounds one transcript line; a longer line is an error.
const MaxLineBytes = 64 << 20

// Record is one conversation record of a transcript: a user or assistant
// record, or a system compact_boundary record.
type Record struct {
	// Line is the 1-based line of the record in the transcript.
	Line int
	// Type is TypeUser, TypeAssistant or TypeSystem.
	Type    string
	Subtype string

	UUID              string
	ParentUUID        string
	LogicalParentUUID string
	SessionID         string
	AgentID           string
	IsSidechain       bool
	IsMeta            bool
	IsCompactSummary  bool
	Timestamp         time.Time

	// Message is the record's message with UUID set to the record's uuid.
	// For an assistant record it holds that record's blocks only.
	Message turn.Message
	// MessageID is the API message id (message.id) of an assistant record;
	// the records of one response share it.
	MessageID string
	Model     string
	// StopReason is the recorded message.stop_reason; usually empty in
	// transcripts, which write records while streaming.
	StopReason string
	// Usage is message.usage of an assistant record, nil when absent.
	Usage *turn.Usage

	// Compact is the compactMetadata of a compact_boundary record.
	Compact *CompactMetadata
}

// CompactMetadata describes a compaction the CLI performed.
type CompactMetadata struct {
	Trigger   string `json:"trigger"`
	PreTokens int64  `json:"preTokens"`
}

// Kind is "user", "assistant" or KindCompactBoundary.
func (r *Record) Kind() string {
	if r.IsBoundary() {
		return KindCompactBoundary
	}
	return r.Type
}

// IsBoundary reports whether the record is a compact_boundary.
func (r *Record) IsBoundary() bool {
	return r.Type == TypeSystem && r.Subtype == SubtypeBoundary
}

// IsResponse reports whether the record is part of a model API response: an
// assistant record with usage, not made up by the CLI.
func (r *Record) IsResponse() bool {
	return r.Type == TypeAssistant && r.Usage != nil && r.Model != SyntheticModel
}

// rawRecord is the part of a transcript line the importer reads.
type rawRecord struct {
	Type              string           `json:"type"`
	Subtype           string           `json:"subtype"`
	UUID              string           `json:"uuid"`
	ParentUUID        *string          `json:"parentUuid"`
	LogicalParentUUID *string          `json:"logicalParentUuid"`
	SessionID         string           `json:"sessionId"`
	AgentID           string           `json:"agentId"`
	IsSidechain       bool             `json:"isSidechain"`
	IsMeta            bool             `json:"isMeta"`
	IsCompactSummary  bool             `json:"isCompactSummary"`
	Timestamp         string           `json:"timestamp"`
	Message           *rawMessage      `json:"message"`
	CompactMetadata   *CompactMetadata `json:"compactMetadata"`
}

type rawMessage struct {
	ID         string       `json:"id"`
	Role       string       `json:"role"`
	Model      string       `json:"model"`
	Content    turn.Content `json:"content"`
	StopReason *string      `json:"stop_reason"`
	Usage      *turn.Usage  `json:"usage"`
}

// Parse reads a transcript and returns its conversation records in file
// order: user and assistant records, and system compact_boundary records.
// Every other record (progress, other system records, file-history-snapshot,
// queue-operation, summary, unknown types) is skipped. Blank lines are
// skipped; a line that is not valid JSON, or a conversation record that cannot
// be read, is an error naming the line.
func Parse(r io.Reader) ([]Record, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		out  []Record
		line []byte
	)
	for n := 1; ; n++ {
		var err error
		line, err = readLine(br, line[:0])
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("claudecode: line %d: %w", n, err)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			rec, keep, perr := parseLine(trimmed, n)
			if perr != nil {
				return nil, fmt.Errorf("claudecode: line %d: %w", n, perr)
			}
			if keep {
				out = append(out, rec)
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
	}
}

// readLine appends the next line (without its newline) to buf. It returns
// io.EOF with the last line when the input ends.
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxLineBytes {
			return buf, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, err
		}
	}
}

func parseLine(data []byte, n int) (Record, bool, error) {
	var head struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return Record{}, false, fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)
		}
		return Record{}, false, fmt.Errorf("not a JSON object: %w", err)
	}
	switch {
	case head.Type == TypeUser, head.Type == TypeAssistant:
	case head.Type == TypeSystem && head.Subtype == SubtypeBoundary:
	default:
		return Record{}, false, nil
	}

	var raw rawRecord
	if err := json.Unmarshal(data, &raw); err != nil {
		return Record{}, false, fmt.Errorf("%s record: %w", head.Type, err)
	}
	rec := Record{
		Line:             n,
		Type:             raw.Type,
		Subtype:          raw.Subtype,
		UUID:             raw.UUID,
		SessionID:        raw.SessionID,
		AgentID:          raw.AgentID,
		IsSidechain:      raw.IsSidechain,
		IsMeta:           raw.IsMeta,
		IsCompactSummary: raw.IsCompactSummary,
		Compact:          raw.CompactMetadata,
	}
	if rec.UUID == "" {
		rec.UUID = fmt.Sprintf("line-%d", n)
	}
	if raw.ParentUUID != nil {
		rec.ParentUUID = *raw.ParentUUID
	}
	if raw.LogicalParentUUID != nil {
		rec.LogicalParentUUID = *raw.LogicalParentUUID
	}
	if raw.Timestamp != "" {
		ts, err := time.Parse(time.RFC3339Nano, raw.Timestamp)
		if err != nil {
			return Record{}, false, fmt.Errorf("%s record %s: timestamp: %w", raw.Type, rec.UUID, err)
		}
		rec.Timestamp = ts
	}
	if rec.IsBoundary() {
		if rec.Compact == nil {
			rec.Compact = &CompactMetadata{}
		}
		return rec, true, nil
	}

	if raw.Message == nil {
		return Record{}, false, fmt.Errorf("%s record %s has no message", raw.Type, rec.UUID)
	}
	m := raw.Message
	role := m.Role
	if role == "" {
		role = raw.Type
	}
	if role != TypeUser && role != TypeAssistant {
		return Record{}, false, fmt.Errorf("%s record %s: message role %q is neither user nor assistant", raw.Type, rec.UUID, role)
	}
	content := m.Content
	if content == nil {
		content = turn.Content{}
	}
	rec.Message = turn.Message{UUID: rec.UUID, Role: role, Content: content}
	if raw.Type == TypeAssistant {
		rec.MessageID = m.ID
		rec.Model = m.Model
		rec.Usage = m.Usage
		if m.StopReason != nil {
			rec.StopReason = *m.StopReason
		}
	}
	return rec, true, nil
}
