package benchmark

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// PreflightTiming is POST /v1/sessions/{id}/preflight at one session size.
type PreflightTiming struct {
	Tokens    int64
	Latencies []time.Duration
}

// preflightRound is the body of a preflight asked before the next model
// call of a session BuildSession made: the round it would add, as the
// agent holds it then (the user's request, the model's tool call and its
// 3,200-byte result), on the session's model.
func preflightRound(id string) ([]byte, error) {
	input, err := json.Marshal(map[string]string{"description": "look around", "prompt": "find the config loader"})
	if err != nil {
		return nil, err
	}
	call := id + "-call-next"
	result := turn.Content{{Type: turn.BlockText, Text: strings.Repeat("result of the next search. ", 200)[:3_200]}}
	return json.Marshal(api.PreflightRequest{
		Model: "claude-sonnet-4-5",
		InputMessages: []turn.Message{
			{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: strings.Repeat("Please keep going with the refactor. ", 11)}}},
			{Role: "assistant", Content: turn.Content{{Type: turn.BlockText, Text: "Searching."}, {Type: turn.BlockToolUse, ID: call, Name: "Task", Input: input}}},
			{Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: call, Content: &result}}},
		},
	})
}

// PreflightLatency times POST /v1/sessions/{id}/preflight over HTTP (the
// API key checked, the body read, the session's count taken and the new
// round counted on it), n times, with the round of preflightRound.
func (s *System) PreflightLatency(ctx context.Context, id string, n int) ([]time.Duration, error) {
	body, err := preflightRound(id)
	if err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := s.postPreflight(ctx, id, body); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func (s *System) postPreflight(ctx context.Context, id string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.API+"/v1/sessions/"+id+"/preflight", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("benchmark: preflight: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("benchmark: preflight: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("benchmark: preflight of %s: HTTP %d: %.300s", id, resp.StatusCode, data)
	}
	return nil
}
