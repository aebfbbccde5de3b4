package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// BuildSession applies rounds to a session, through the accountant, until
// it holds about size tokens: a user request, a tool call and its 3,200-byte
// result, and a short answer. It is not timed.
func (s *System) BuildSession(ctx context.Context, id string, size int64) error {
	var seq, count int64
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	input, err := json.Marshal(map[string]string{"description": "look around", "prompt": "find the config loader"})
	if err != nil {
		return err
	}
	for round := 0; count < size; round++ {
		call := fmt.Sprintf("%s-call-%d", id, round)
		result := turn.Content{{Type: turn.BlockText, Text: strings.Repeat(fmt.Sprintf("result %d of the search. ", round), 200)[:3_200]}}
		request := []turn.Message{
			{UUID: fmt.Sprintf("%s-u-%d", id, round), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: strings.Repeat("Please keep going with the refactor. ", 11)}}},
		}
		for _, r := range []struct {
			in   []turn.Message
			resp turn.Message
		}{
			{request, turn.Message{UUID: fmt.Sprintf("%s-a-%d", id, round), Role: "assistant", StopReason: "tool_use",
				Content: turn.Content{{Type: turn.BlockText, Text: "Searching."}, {Type: turn.BlockToolUse, ID: call, Name: "Task", Input: input}}}},
			{[]turn.Message{{UUID: fmt.Sprintf("%s-r-%d", id, round), Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: call, Content: &result}}}},
				turn.Message{UUID: fmt.Sprintf("%s-b-%d", id, round), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "Found it; the loader reads the file once."}}}},
		} {
			seq++
			at = at.Add(time.Minute)
			var added int64
			for _, m := range r.in {
				added += tokens.EstimateMessage(m)
			}
			count += added + tokens.EstimateMessage(r.resp)
			resp := r.resp
			if err := s.Accountant.Apply(ctx, turn.Event{
				Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-e-%d", id, seq), TenantID: Tenant, SessionID: id, Seq: seq,
				Model: "claude-sonnet-4-5", InputMessages: r.in, Response: &resp, OccurredAt: at,
				Usage: &turn.Usage{InputTokens: count - tokens.EstimateMessage(r.resp), OutputTokens: tokens.EstimateMessage(r.resp)},
			}); err != nil {
				return fmt.Errorf("benchmark: build session %s: %w", id, err)
			}
		}
	}
	return nil
}

// ContextLatency times GET /v1/sessions/{id}/context over HTTP (the API key
// checked, the session loaded, micro-compaction decided, rendered, compared
// with the previous read, encoded), n times.
func (s *System) ContextLatency(ctx context.Context, id string, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := s.getContext(ctx, id); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func (s *System) getContext(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.API+"/v1/sessions/"+id+"/context", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("benchmark: context: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("benchmark: context: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("benchmark: context of %s: HTTP %d", id, resp.StatusCode)
	}
	return nil
}

// SelectLatency times the baseline of ContextLatency: one transaction that
// reads the session's messages, nothing rendered, n times.
func (s *System) SelectLatency(ctx context.Context, id string, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		err := s.Store.InTx(ctx, Tenant, func(tx *store.Tx) error {
			_, err := tx.Messages(ctx, id)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("benchmark: select: %w", err)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}
