package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
)

// postTurn sends one turn event over HTTP and wants it accepted.
func postTurn(t *testing.T, p *process, key string, ev map[string]any) {
	t.Helper()
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, p.http+"/v1/turns", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := apitest.Client(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
}

// patientRecall lets a context request of the development tenant wait up to
// a minute for the recall prefetch of its latest user message, so that a
// busy test machine cannot decide the message shows nothing before the
// prefetch ends (the default wait is 3 s). Set before the tenant's first
// turn, so no process has its settings cached yet.
func patientRecall(t *testing.T, dbURL string) {
	t.Helper()
	require.NoError(t, run(context.Background(), []string{"tenant", "settings", "dev", `{"recall": {"prefetch_wait_ms": 60000}}`},
		env(map[string]string{"MNEMOS_DATABASE_URL": dbURL}), io.Discard, io.Discard))
}

// TestARememberedFactIsExtractedEndToEnd is long-term memory extraction as
// `make run` serves it: one process, the builtin provider, no network. A
// session's user asks the agent to remember something; the turn event goes
// in over HTTP, the accountant stores it and publishes turn.accounted, the
// extractor's builtin rules find the request and save it as a feedback
// memory of the session's project scope: it is listed in the scope's
// index, readable over the API, announced as memory.saved, and counted.
// Then a later session of the same project asks about staging, and the
// memory is surfaced in its context beside that question.
func TestARememberedFactIsExtractedEndToEnd(t *testing.T) {
	t.Parallel()
	bcfg := bustest.Config(t)
	b := bustest.Connect(t, bcfg)
	saved, err := b.Conn().SubscribeSync(b.Prefix(bus.KindMemorySaved + ".dev.>"))
	require.NoError(t, err)
	dbURL := pgtest.URL(t)
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL": dbURL,
		"MNEMOS_HTTP_ADDR":    "127.0.0.1:0",
		"MNEMOS_NATS_URL":     bcfg.URL,
		"MNEMOS_NAMESPACE":    bcfg.Namespace,
		"MNEMOS_DEV_API_KEY":  "test-dev-key",
	}, "-target=all")
	patientRecall(t, dbURL)

	postTurn(t, p, "test-dev-key", map[string]any{
		"schema": "mnemos.turn.v1", "event_id": "e2e-1", "session_id": "staging-talk", "seq": 1,
		"agent_id": "main", "memory_scope": map[string]string{"user": "u-42", "project": "repo-x"},
		"model": "claude-sonnet-4-5", "context_window": 200000, "max_output_tokens": 32000,
		"input_messages": []map[string]any{{"uuid": "u-1", "role": "user", "content": []map[string]any{
			{"type": "text", "text": "remember that our staging DB is read-only on Fridays"},
		}}},
		"response": map[string]any{"uuid": "a-1", "role": "assistant", "stop_reason": "end_turn", "content": []map[string]any{
			{"type": "text", "text": "Noted: no writes to staging on Fridays."},
		}},
		"usage":       map[string]any{"input_tokens": 1200, "output_tokens": 12},
		"occurred_at": "2026-11-22T10:00:00Z",
	})

	var index struct {
		Content string `json:"content"`
	}
	require.Eventually(t, func() bool {
		return getJSON(t, p.http+"/v1/scopes/project:repo-x/index", "test-dev-key", &index) == http.StatusOK &&
			strings.Contains(index.Content, "(staging-db-read-only-fridays.md)")
	}, 60*time.Second, 50*time.Millisecond, "the memory is listed in the scope's index (have %q)", index.Content)

	var m struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Markdown string `json:"markdown"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, p.http+"/v1/scopes/project:repo-x/memories/staging-db-read-only-fridays", "test-dev-key", &m))
	require.Equal(t, "feedback", m.Type)
	require.Contains(t, m.Markdown, "Our staging DB is read-only on Fridays.")
	require.Contains(t, m.Markdown, "**Why:**")
	require.Contains(t, m.Markdown, "**How to apply:**")

	msg, err := saved.NextMsg(30 * time.Second)
	require.NoError(t, err, "memory.saved was published")
	var ev events.MemorySaved
	require.NoError(t, json.Unmarshal(msg.Data, &ev))
	require.Equal(t, "project:repo-x", ev.Scope)
	require.Equal(t, []string{"staging-db-read-only-fridays"}, ev.Created)
	require.Equal(t, "e2e-1", ev.SourceTurn)
	require.Equal(t, "builtin", ev.LLMProvider)

	body := metricsOf(t, p)
	require.Regexp(t, `mnemos_extractor_runs_total\{[^}]*outcome="saved"[^}]*\} 1`, body)
	require.Regexp(t, `mnemos_llm_calls_total\{[^}]*task="extraction"[^}]*\} [1-9]`, body, "the run went through the guarded provider")

	// A later session of the same project: its user asks about staging.
	const question = "can we run the schema migration on the staging DB now?"
	postTurn(t, p, "test-dev-key", map[string]any{
		"schema": "mnemos.turn.v1", "event_id": "e2e-later-1", "session_id": "staging-later", "seq": 1,
		"agent_id": "main", "memory_scope": map[string]string{"user": "u-7", "project": "repo-x"},
		"model": "claude-sonnet-4-5", "context_window": 200000, "max_output_tokens": 32000,
		"input_messages": []map[string]any{{"uuid": "later-u-1", "role": "user", "content": []map[string]any{
			{"type": "text", "text": question},
		}}},
		"response": map[string]any{"uuid": "later-a-1", "role": "assistant", "stop_reason": "tool_use", "content": []map[string]any{
			{"type": "text", "text": "Let me look at the migration first."},
			{"type": "tool_use", "id": "toolu_later_1", "name": "Read", "input": map[string]any{"file_path": "migrations/0042.sql"}},
		}},
		"usage":       map[string]any{"input_tokens": 1500, "output_tokens": 30},
		"occurred_at": "2026-11-22T11:00:00Z",
	})
	var later struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
		MessageUUIDs []string `json:"message_uuids"`
	}
	require.Eventually(t, func() bool {
		return getJSON(t, p.http+"/v1/sessions/staging-later/context", "test-dev-key", &later) == http.StatusOK &&
			len(later.MessageUUIDs) == 2
	}, 60*time.Second, 50*time.Millisecond, "the later session's context")
	require.Equal(t, "later-u-1", later.MessageUUIDs[0])
	user := later.Messages[0].Content
	require.Len(t, user, 2, "the question, and the memory beside it")
	require.Equal(t, question, user[0].Text)
	require.Contains(t, user[1].Text, "<system-reminder>")
	require.Contains(t, user[1].Text, "project:repo-x/staging-db-read-only-fridays.md (feedback, saved today)")
	require.Contains(t, user[1].Text, "Our staging DB is read-only on Fridays.")
}
