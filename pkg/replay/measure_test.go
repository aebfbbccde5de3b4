package replay_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/replay"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// rawRecords counts a transcript's records by type and keeps the blobs' messages.
func rawRecords(t *testing.T, data []byte) (map[string]int, map[string]json.RawMessage) {
	t.Helper()
	types, blobs := map[string]int{}, map[string]json.RawMessage{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var rec struct {
			Type    string          `json:"type"`
			Hash    string          `json:"hash"`
			Message json.RawMessage `json:"message"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
		types[rec.Type]++
		if rec.Type == "api-request-blob" {
			blobs[rec.Hash] = rec.Message
		}
	}
	require.NoError(t, sc.Err())
	return types, blobs
}

// TestWithRequests: every sample's request records pair up with its
// main-agent rounds; the events then carry the messages as sent (the
// first holds the CLI's reminders beside the prompt, which the user record
// does not) and the system prompt and tools once, by hash after.
func TestWithRequests(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"short.jsonl", "tool_heavy.jsonl", "subagent.jsonl", "long.jsonl"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(claudecodetest.Path(t, name))
			require.NoError(t, err)
			types, blobs := rawRecords(t, data)
			log, err := replay.ReadRequestLog(bytes.NewReader(data))
			require.NoError(t, err)
			require.Len(t, log.Requests, types["api-request"])

			records, err := claudecode.Parse(bytes.NewReader(data))
			require.NoError(t, err)
			events := replay.Events(records, replay.Options{})
			got, err := replay.WithRequests(events, log)
			require.NoError(t, err)
			require.Len(t, got, len(events))

			sent := 0
			for i, ev := range got {
				require.Equal(t, turn.SchemaV1_1, ev.Schema)
				require.NotNil(t, ev.RequestPrefix)
				require.NotEmpty(t, ev.RequestPrefix.Hash)
				if ev.RequestPrefix.System != nil {
					sent++
				}
				require.Equal(t, events[i].Response, ev.Response, "the response is the transcript's")
				for _, m := range ev.InputMessages {
					require.Equal(t, "user", m.Role)
				}
			}
			require.Equal(t, types["api-request-shape"] > 0, sent >= 1)
			require.LessOrEqual(t, sent, types["api-request-shape"], "whole only when the shape changes")

			// The first request's messages are blobs, and hold more than the user record.
			var first []byte
			for _, m := range got[0].InputMessages {
				first = append(first, m.Content[0].Text...)
			}
			var record []byte
			for _, m := range events[0].InputMessages {
				for _, b := range m.Content {
					record = append(record, b.Text...)
				}
			}
			require.Greater(t, len(first), len(record))
			found := false
			for _, raw := range blobs {
				found = found || strings.Contains(string(raw), string(record[:min(len(record), 40)]))
			}
			require.True(t, found, "the prompt is inside a blob")

			_, err = replay.WithRequests(events[:len(events)-1], log)
			require.Error(t, err, "rounds and requests that do not pair up")
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	var errs []float64
	for i := 100; i >= 1; i-- {
		errs = append(errs, float64(i)/10)
	}
	s := replay.Summarize(errs)
	require.Equal(t, len(errs), s.N)
	require.Equal(t, errs[len(errs)-50], s.P50, "nearest rank: the 50th smallest")
	require.Equal(t, errs[len(errs)-95], s.P95)
	require.Equal(t, errs[0], s.Max)
	require.Equal(t, replay.Summary{}, replay.Summarize(nil))
	require.InDelta(t, 10.0, replay.ErrorPercent(110, 100), 1e-9)
	require.InDelta(t, 10.0, replay.ErrorPercent(90, 100), 1e-9)
}

func TestHeuristic(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("a", 401)
	input := json.RawMessage(`{"command":"ls"}`)
	msg := turn.Message{UUID: "u", Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}
	call := turn.Content{{Type: turn.BlockToolUse, ID: "t", Name: "Bash", Input: input}}
	require.Equal(t, int64((len(text)+3)/4), replay.HeuristicTokens(msg.Content))
	require.Equal(t, int64((len("Bash")+len(input)+3)/4), replay.HeuristicTokens(call))

	var h replay.Heuristic
	first := h.Predict(turn.Event{InputMessages: []turn.Message{msg}})
	require.Equal(t, replay.HeuristicTokens(msg.Content), first, "before usage: the messages alone, no system or tools")
	u := turn.Usage{InputTokens: 10, CacheReadInputTokens: 20_000, OutputTokens: 300}
	h.Observe(u)
	require.Equal(t, u.Total()+first, h.Predict(turn.Event{InputMessages: []turn.Message{msg}}))
	require.Equal(t, first, h.Predict(turn.Event{ClientCompaction: &turn.ClientCompaction{}, InputMessages: []turn.Message{msg}}),
		"after the client's compaction: the messages since")
}
