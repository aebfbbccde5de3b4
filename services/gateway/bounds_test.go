package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// errorOf returns an error answer's code and message.
func errorOf(t *testing.T, body map[string]any) (string, string) {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	require.True(t, ok, "an error answer: %v", body)
	return e["code"].(string), e["message"].(string)
}

func TestTurnsOverTheSessionBoundsAreRefusedWithTheLimitNamed(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.SetTenantSettings(ctx, "acme", []byte(
		`{"limits": {"turn_messages": 3, "turn_bytes": 4096, "session_messages": 6, "seq_window": 10}}`)))
	// A session the accountant left at seq 3 with 5 messages.
	_, err := pgtest.Admin(t, h.store).Exec(ctx,
		`INSERT INTO sessions (tenant_id, session_id, agent_id, applied_seq, message_count) VALUES ('acme', 's1', 'main', 3, 5)`)
	require.NoError(t, err)

	many := event("s1", 4)
	for i := range 3 {
		many.InputMessages = append(many.InputMessages, turn.Message{UUID: fmt.Sprintf("extra-%d", i), Role: "user", Content: turn.Content{{Type: "text", Text: "more"}}})
	}
	large := event("s1", 4)
	large.InputMessages[0].Content[0].Text = strings.Repeat("x", 5000)
	full := event("s1", 4) // 2 messages: 5 + 2 > 6
	far := event("s1", 14) // 3 + 10 is the furthest allowed
	cases := []struct {
		name   string
		ev     turn.Event
		status int
		code   turn.Reason
		names  string
	}{
		{"too many messages", many, http.StatusRequestEntityTooLarge, turn.ReasonTooManyMessages, "turn_messages limit is 3"},
		{"too large", large, http.StatusRequestEntityTooLarge, turn.ReasonTooLarge, "turn_bytes limit of 4096 bytes"},
		{"session full", full, http.StatusRequestEntityTooLarge, turn.ReasonSessionFull, "session_messages limit of 6"},
		{"seq too far", far, http.StatusBadRequest, turn.ReasonSeqTooFar, "seq_window of 10"},
	}
	for _, c := range cases {
		status, body := h.do(t, "POST", "/v1/turns", "key-acme", encode(t, c.ev))
		require.Equal(t, c.status, status, "%s: %v", c.name, body)
		code, msg := errorOf(t, body)
		require.Equal(t, string(c.code), code, c.name)
		require.Contains(t, msg, c.names, c.name)
		require.EqualValues(t, 1, h.metrics.Sum("mnemos.turns.refused", "reason", string(c.code)), c.name)
	}
	for _, l := range []string{limits.LimitTurnMessages, limits.LimitEventBytes, limits.LimitSessionMessages, limits.LimitSeqWindow} {
		require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", l), l)
	}

	// Within the bounds: the last seq of the window, a retry of an applied
	// seq (the accountant decides what it is) and a new session.
	small := event("s1", 13)
	small.Response = nil // 1 message: 5 + 1 fits
	for _, ev := range []turn.Event{small, event("s1", 2), event("s2", 10)} {
		status, body := h.do(t, "POST", "/v1/turns", "key-acme", encode(t, ev))
		require.Equal(t, http.StatusAccepted, status, "%s: %v", ev.EventID, body)
	}
	status, body := h.do(t, "POST", "/v1/turns", "key-acme", encode(t, event("s3", 11)))
	require.Equal(t, http.StatusBadRequest, status, "a new session starts at 0: %v", body)

	// Another tenant has the defaults: a seq 1,000 ahead is fine, 1,001 is not.
	status, body = h.do(t, "POST", "/v1/turns", "key-globex", encode(t, event("g1", limits.DefaultSeqWindow)))
	require.Equal(t, http.StatusAccepted, status, body)
	status, body = h.do(t, "POST", "/v1/turns", "key-globex", encode(t, event("g1", 999_999_999_999)))
	require.Equal(t, http.StatusBadRequest, status, body)
	code, _ := errorOf(t, body)
	require.Equal(t, string(turn.ReasonSeqTooFar), code)
}

func TestSessionShowsTheSeqsItGaveUp(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	admin := pgtest.Admin(t, h.store)
	_, err := admin.Exec(ctx, `INSERT INTO sessions (tenant_id, session_id, agent_id, applied_seq) VALUES ('acme', 'fresh', 'main', 1), ('acme', 'gappy', 'main', 9)`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `UPDATE sessions SET skipped_seqs = 5, last_skipped_from = 6, last_skipped_to = 8, rejected_turns = 1 WHERE session_id = 'gappy'`)
	require.NoError(t, err)

	status, body := h.do(t, "GET", "/v1/sessions/gappy", "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.EqualValues(t, 5, body["skipped_seqs"])
	require.Equal(t, map[string]any{"from": float64(6), "to": float64(8)}, body["last_skipped"])
	require.EqualValues(t, 1, body["rejected_turns"])

	status, body = h.do(t, "GET", "/v1/sessions/fresh", "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.EqualValues(t, 0, body["skipped_seqs"])
	require.NotContains(t, body, "last_skipped")
}

func TestTurnsWithAWindowWithoutRoomAreRefused(t *testing.T) {
	t.Parallel()
	h := setup(t)
	tiny := event("w1", 1)
	tiny.ContextWindow = 1000 // under the reserve and buffers: every threshold at or below zero
	status, body := h.do(t, "POST", "/v1/turns", "key-acme", encode(t, tiny))
	require.Equal(t, http.StatusBadRequest, status, "%v", body)
	code, msg := errorOf(t, body)
	require.Equal(t, string(turn.ReasonBadContextWindow), code)
	require.Contains(t, msg, "the smallest window that works")

	fine := event("w1", 1)
	fine.ContextWindow = 200_000
	status, body = h.do(t, "POST", "/v1/turns", "key-acme", encode(t, fine))
	require.Equal(t, http.StatusAccepted, status, "%v", body)
}
