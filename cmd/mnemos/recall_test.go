package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// call sends body to the process's API and decodes the JSON answer into out.
func call(t *testing.T, method, url, key, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := apitest.Client(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(t, json.NewDecoder(bytes.NewReader(raw)).Decode(out), string(raw))
	}
	return resp.StatusCode
}

// TestAllInOneRecallsProjectMemories runs `mnemos -target=all` as `make run`
// does, with the builtin selector: memories saved through the memory API in
// a project's scope are recalled for a session of that project whose user
// asks about staging — prefetched on ingest and shown in the context beside
// that user message, and through POST …/recall.
func TestAllInOneRecallsProjectMemories(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL":   dbURL,
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}, "-target=all")
	patientRecall(t, dbURL)
	const key = "test-dev-key"
	for name, md := range map[string]string{
		"staging-db-read-only-fridays": "---\nname: staging-db-read-only-fridays\ndescription: The staging database is read-only on Fridays\ntype: feedback\n---\n\n" +
			"Do not run migrations on staging on a Friday.\n\n**Why:** the weekly replica sync holds it read-only.\n**How to apply:** schedule migrations for Monday.\n",
		"release-notes-order": "---\nname: release-notes-order\ndescription: Release notes list user-facing changes first\ntype: feedback\n---\n\nUser-facing changes first, then fixes.\n",
	} {
		require.Equal(t, http.StatusCreated, call(t, "PUT", p.http+"/v1/scopes/project:repo-x/memories/"+name, key, md, nil))
	}
	event := `{"schema": "mnemos.turn.v1", "event_id": "staging-1", "session_id": "staging", "seq": 1,
		"memory_scope": {"project": "repo-x"}, "model": "claude-sonnet-4-5",
		"input_messages": [{"uuid": "u-1", "role": "user", "content": [{"type": "text", "text": "can you run the migration on the staging database?"}]}],
		"response": {"uuid": "a-1", "role": "assistant", "stop_reason": "tool_use", "content": [
			{"type": "text", "text": "Running it."}, {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make migrate"}}]},
		"usage": {"input_tokens": 900, "output_tokens": 40}, "occurred_at": "2026-11-22T10:00:00Z"}`
	require.Equal(t, http.StatusAccepted, call(t, "POST", p.http+"/v1/turns", key, event, nil))
	var session struct {
		AppliedSeq int64 `json:"applied_seq"`
	}
	require.Eventually(t, func() bool {
		return call(t, "GET", p.http+"/v1/sessions/staging", key, "", &session) == http.StatusOK && session.AppliedSeq == 1
	}, 30*time.Second, 20*time.Millisecond)

	var ctx struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
		MessageUUIDs []string `json:"message_uuids"`
	}
	require.Equal(t, http.StatusOK, call(t, "GET", p.http+"/v1/sessions/staging/context", key, "", &ctx))
	require.Equal(t, []string{"u-1", "a-1"}, ctx.MessageUUIDs)
	user := ctx.Messages[0].Content
	require.Len(t, user, 2, "the user's question, and the memory beside it")
	require.Equal(t, "can you run the migration on the staging database?", user[0].Text)
	require.Contains(t, user[1].Text, "<system-reminder>\nA saved memory that may help here: project:repo-x/staging-db-read-only-fridays.md (feedback, saved today).")
	require.Contains(t, user[1].Text, "Do not run migrations on staging on a Friday.")
	require.NotContains(t, user[1].Text, "release-notes-order")

	var recalled struct {
		Outcome  string `json:"outcome"`
		Memories []struct {
			Scope string `json:"scope"`
			Name  string `json:"name"`
			Type  string `json:"type"`
			Age   string `json:"age"`
			Text  string `json:"text"`
		} `json:"memories"`
		LLMProvider string `json:"llm_provider"`
	}
	require.Equal(t, http.StatusOK, call(t, "POST", p.http+"/v1/sessions/staging-2/recall", key,
		`{"query": "can you run the migration on the staging database?", "recent_tools": ["Bash"], "memory_scope": {"project": "repo-x"}}`, &recalled))
	require.Equal(t, "surfaced", recalled.Outcome)
	require.Len(t, recalled.Memories, 1)
	require.Equal(t, "staging-db-read-only-fridays", recalled.Memories[0].Name)
	require.Equal(t, "project:repo-x", recalled.Memories[0].Scope)
	require.Equal(t, "feedback", recalled.Memories[0].Type)
	require.Equal(t, "today", recalled.Memories[0].Age)
	require.Equal(t, user[1].Text, recalled.Memories[0].Text)
	require.Equal(t, "builtin", recalled.LLMProvider)

	body := metricsOf(t, p)
	require.Regexp(t, `mnemos_recall_requests_total\{[^}]*outcome="surfaced"[^}]*source="prefetch"[^}]*\} 1`, body)
	require.Regexp(t, `mnemos_recall_requests_total\{[^}]*outcome="surfaced"[^}]*source="api"[^}]*\} 1`, body)
	require.Regexp(t, `mnemos_recall_selected_total\{[^}]*source="prefetch"[^}]*\} 1`, body)
	require.Regexp(t, `mnemos_llm_calls_total\{[^}]*task="recall"[^}]*\} 2`, body, "both selections went through the guarded provider")
}
