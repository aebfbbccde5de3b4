package replay

import (
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Repeat returns records followed by n-1 more copies of them, as if the
// conversation had gone on that long: a session long enough to cross the
// compaction threshold, built from a short transcript. Copy k (from 1) gets
// fresh ids (record uuids, message ids, tool call ids, each with the suffix
// ".rk"), lines and timestamps after the copy before it, and usage that
// carries on from where that copy ended: k times what one copy grows the
// context (its largest usage total minus its smallest) is added to its cache reads.
func Repeat(records []claudecode.Record, n int) []claudecode.Record {
	if n <= 1 || len(records) == 0 {
		return records
	}
	var lo, hi int64 = -1, 0
	lines := 0
	first, last := records[0].Timestamp, records[0].Timestamp
	for _, r := range records {
		lines = max(lines, r.Line)
		if r.Usage != nil && !r.IsSidechain {
			if lo < 0 || r.Usage.Total() < lo {
				lo = r.Usage.Total()
			}
			hi = max(hi, r.Usage.Total())
		}
		if r.Timestamp.Before(first) {
			first = r.Timestamp
		}
		if r.Timestamp.After(last) {
			last = r.Timestamp
		}
	}
	growth := max(hi-lo, 0) // what one copy adds to the context
	span := last.Sub(first) + time.Minute
	out := make([]claudecode.Record, 0, len(records)*n)
	out = append(out, records...)
	for k := 1; k < n; k++ {
		suffix := fmt.Sprintf(".r%d", k)
		renamed := func(id string) string {
			if id == "" {
				return ""
			}
			return id + suffix
		}
		for _, r := range records {
			c := r
			c.Line = r.Line + lines*k
			c.UUID, c.ParentUUID, c.LogicalParentUUID = renamed(r.UUID), renamed(r.ParentUUID), renamed(r.LogicalParentUUID)
			c.MessageID = renamed(r.MessageID)
			c.Timestamp = r.Timestamp.Add(span * time.Duration(k))
			c.Message = r.Message
			c.Message.UUID = renamed(r.Message.UUID)
			c.Message.Content = renameCalls(r.Message.Content, renamed)
			if r.Usage != nil {
				u := *r.Usage
				u.CacheReadInputTokens += growth * int64(k)
				c.Usage = &u
			}
			out = append(out, c)
		}
	}
	return out
}

// renameCalls copies content with tool_use ids and the tool results that
// answer them renamed.
func renameCalls(content turn.Content, renamed func(string) string) turn.Content {
	out := make(turn.Content, len(content))
	for i, b := range content {
		switch b.Type {
		case turn.BlockToolUse:
			b.ID = renamed(b.ID)
		case turn.BlockToolResult:
			b.ToolUseID = renamed(b.ToolUseID)
		}
		out[i] = b
	}
	return out
}

// UntilCompaction returns the records before the transcript's first compact
// boundary of the main session (all of them when it has none): the
// conversation up to the client's own compaction. Replayed with Repeat, its
// copies grow the context without a client compaction that could bring the
// count down before Mnemos compacts.
func UntilCompaction(records []claudecode.Record) []claudecode.Record {
	for i := range records {
		if records[i].IsBoundary() && !records[i].IsSidechain {
			return records[:i]
		}
	}
	return records
}
