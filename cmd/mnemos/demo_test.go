package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/demo"
)

// TestDemoToursARunningServer runs `mnemos demo` (what `make demo` runs)
// against `mnemos -target=all` as `make run` starts it, with the builtin
// provider: each of the README's steps gets where the README says. The
// replayed session is counted; the long one is compacted from its notes
// with no model call and its context starts with the boundary; the fact is
// extracted into the run's project scope and shown beside the question of
// a later session; the dream of the scope completes. The API agrees.
func TestDemoToursARunningServer(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL":   dbURL,
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}, "-target=all")
	patientRecall(t, dbURL)
	dir := filepath.Dir(claudecodetest.Path(t, "long.jsonl"))
	var out bytes.Buffer
	err := run(context.Background(), []string{"demo", "--url", p.http, "--transcripts", dir, "--run", "t1"},
		env(map[string]string{"MNEMOS_API_KEY": "test-dev-key"}), &out, io.Discard)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	for _, want := range []string{
		"== 1. Replay a session\nmnemos replay tool_heavy.jsonl → session demo-t1-tour: 6 turn events sent\n",
		"== 2. Watch it compact\nmnemos replay long.jsonl, 2 times up to its own /compact → session demo-t1-long",
		"completed by session_memory",
		"== 3. Remember a fact\n",
		"GET /v1/scopes/project:demo-t1/memories: ",
		"== 4. Recall it in a later session\n",
		"<system-reminder>",
		"== 5. Dream\nPOST /v1/scopes/project:demo-t1/dream: dream ",
		"\nDone: sessions demo-t1-tour, demo-t1-long, demo-t1-first and demo-t1-second",
	} {
		require.Contains(t, out.String(), want)
	}

	// What the run returns, step by step, and what the API says of it.
	res, err := demo.Run(context.Background(), demo.Config{URL: p.http, APIKey: "test-dev-key", Transcripts: dir, Run: "t2"}, io.Discard)
	require.NoError(t, err, "a second run against the same server")
	require.Equal(t, "ok", res.ToolTokens.State)
	require.Positive(t, res.ToolTokens.Count)
	require.Equal(t, "completed", res.Compaction.Status)
	require.Equal(t, "session_memory", res.Compaction.Method)
	require.Zero(t, res.Compaction.LLMCalls)
	require.Less(t, res.Compaction.PostTokens, res.Compaction.PreTokens)
	require.True(t, strings.HasPrefix(res.ContextStart, "<mnemos:compact-boundary"))
	require.Less(t, res.ContextTokens, res.ToolTokens.AutoCompact)
	require.Equal(t, "project:demo-t2", res.Scope)
	require.NotEmpty(t, res.Memory.Name)
	require.Contains(t, res.Reminder, "Tuesdays")
	require.Contains(t, res.Reminder, res.Memory.Name)
	require.Equal(t, "completed", res.Dream.Status)
	require.Equal(t, "builtin", res.Dream.LLMProvider)

	var sessions struct {
		Items []struct {
			SessionID string `json:"session_id"`
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, p.http+"/v1/sessions?limit=4", "test-dev-key", &sessions))
	var ids []string
	for _, it := range sessions.Items {
		ids = append(ids, it.SessionID)
	}
	require.Equal(t, []string{"demo-t2-second", "demo-t2-first", "demo-t2-long", "demo-t2-tour"}, ids)
	var scopes struct {
		Items []struct {
			Scope    string `json:"scope"`
			Memories int64  `json:"memories"`
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, p.http+"/v1/scopes?prefix=project:demo-", "test-dev-key", &scopes))
	require.Len(t, scopes.Items, 2)
	require.Equal(t, "project:demo-t2", scopes.Items[1].Scope)
	require.Positive(t, scopes.Items[1].Memories)
}

// TestDemoSaysWhenNoServerAnswers: without a server the demo stops at once
// and says to start one.
func TestDemoSaysWhenNoServerAnswers(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"demo", "--url", "http://127.0.0.1:1"}, env(nil), io.Discard, io.Discard)
	require.ErrorContains(t, err, "does not answer as Mnemos (start it with `make run`)")
}
