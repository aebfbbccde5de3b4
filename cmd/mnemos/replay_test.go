package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// TestReplayNamesTheSessionAndItsMemoryScope: `mnemos replay` with -scope
// and -agent sends every turn event with that memory scope (so the session
// reaches extraction, recall and dreaming), the events still the main
// agent's; it prints the session's id, its scope, and the requests that
// look at it next. The session is listed under its scope.
func TestReplayNamesTheSessionAndItsMemoryScope(t *testing.T) {
	t.Parallel()
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL":   pgtest.URL(t),
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}, "-target=all")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"replay", "--url", p.http, "--api-key", "test-dev-key", "--session", "rp",
		"-scope", "project=replayed", "-scope", "user=u-1", "-agent", "explore", claudecodetest.Path(t, "tool_heavy.jsonl")}, env(nil), &out, io.Discard))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// The state read back is the server's at that moment: the accountant
	// may not have applied the last events, or any.
	readBack := `; (applied through seq \d+, \d+ tokens \(\w+\), \d+ automatic compactions asked|not accounted yet)$`
	require.Regexp(t, `^session rp: 6 turn events of agent main, memory scope user:u-1 project:replayed agent:explore`+readBack, lines[0])
	require.Equal(t, `next: curl -s -H "Authorization: Bearer $MNEMOS_API_KEY" `+p.http+"/v1/sessions/rp | jq .tokens", lines[1])
	require.Contains(t, lines[2], p.http+"/v1/sessions/rp/context")
	require.Len(t, lines, 3, "a scope was named: no warning")

	var session struct {
		AgentID     string            `json:"agent_id"`
		AppliedSeq  int64             `json:"applied_seq"`
		MemoryScope map[string]string `json:"memory_scope"`
	}
	require.Eventually(t, func() bool {
		return getJSON(t, p.http+"/v1/sessions/rp", "test-dev-key", &session) == http.StatusOK && session.AppliedSeq == 6
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, map[string]string{"project": "replayed", "user": "u-1", "agent": "explore"}, session.MemoryScope)
	require.Equal(t, "main", session.AgentID, "the main agent's events: extraction takes them")
	var list struct {
		Items []struct {
			SessionID string `json:"session_id"`
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, p.http+"/v1/sessions?scope=project:replayed", "test-dev-key", &list))
	require.Len(t, list.Items, 1)
	require.Equal(t, "rp", list.Items[0].SessionID)

	// Without a scope the output says what that means.
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"replay", "--url", p.http, "--api-key", "test-dev-key", "--session", "bare",
		claudecodetest.Path(t, "short.jsonl")}, env(nil), &out, io.Discard))
	require.Regexp(t, `(?m)^session bare: 4 turn events of agent main`+readBack, out.String())
	require.Contains(t, out.String(), "no memory scope: nothing of this session is extracted, recalled or dreamed")
}

// TestReplayRefusesBadScopes: a memory scope that is not kind=id, an
// unknown kind, a bad id, or two ids for one kind stop the replay before
// anything is sent, saying why.
func TestReplayRefusesBadScopes(t *testing.T) {
	t.Parallel()
	path := claudecodetest.Path(t, "short.jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-scope", "project"}, "write it as kind=id"},
		{[]string{"-scope", "team=x"}, `scope kind "team" is not one of user, project, local, agent`},
		{[]string{"-scope", "project=a.b"}, "ids are 1 to 128 letters"},
		{[]string{"-scope", "project=a,project=b"}, "project is named twice (a and b)"},
		{[]string{"-scope", "agent=a", "-agent", "b"}, "agent is named twice (a and b)"},
		{[]string{"-agent", "-x"}, "-agent: memory scope"},
	} {
		args := append([]string{"replay", "--url", "http://127.0.0.1:1", "--api-key", "k"}, c.args...)
		err := run(context.Background(), append(args, path), env(nil), io.Discard, io.Discard)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
}

// TestReplayAfterTheDatabaseIsNewIsApplied: the embedded NATS keeps one
// JetStream store per database, so a transcript replayed into a new
// database is applied even while the message ids of the same events sent
// to another database, through the same MNEMOS_NATS_STORE_DIR, are within
// the duplicate window. Sent again to the same database, the events are
// accepted and the replay says each was a duplicate of one accepted
// already: nothing new was published.
func TestReplayAfterTheDatabaseIsNewIsApplied(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	serve := func() *process {
		return start(t, map[string]string{
			"MNEMOS_DATABASE_URL":   pgtest.URL(t),
			"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
			"MNEMOS_NATS_STORE_DIR": storeDir,
			"MNEMOS_DEV_API_KEY":    "test-dev-key",
		}, "-target=all")
	}
	replayed := func(p *process) string {
		var stderr bytes.Buffer
		require.NoError(t, run(context.Background(), []string{"replay", "--url", p.http, "--api-key", "test-dev-key", "--session", "again",
			claudecodetest.Path(t, "short.jsonl")}, env(nil), io.Discard, &stderr))
		return stderr.String()
	}
	applied := func(p *process) {
		var session struct {
			AppliedSeq int64 `json:"applied_seq"`
		}
		require.Eventually(t, func() bool {
			return getJSON(t, p.http+"/v1/sessions/again", "test-dev-key", &session) == http.StatusOK && session.AppliedSeq == 4
		}, 30*time.Second, 50*time.Millisecond)
	}
	storeOf := func(p *process) string {
		for _, line := range p.banner {
			if _, dir, ok := strings.Cut(line, "JetStream store "); ok {
				return strings.TrimSuffix(dir, ")")
			}
		}
		t.Fatalf("no JetStream store in the banner %q", p.banner)
		return ""
	}

	first := serve()
	require.Equal(t, "sent 4 of 4 turn events to "+first.http+" (0 retries)\n", replayed(first))
	applied(first)
	require.Equal(t, "sent 4 of 4 turn events to "+first.http+", 4 duplicates of events already accepted (0 retries)\n", replayed(first))

	second := serve()
	require.Equal(t, "sent 4 of 4 turn events to "+second.http+" (0 retries)\n", replayed(second))
	applied(second)
	require.NotEqual(t, storeOf(first), storeOf(second), "one store per database")
	require.Equal(t, storeDir, filepath.Dir(storeOf(second)), "under MNEMOS_NATS_STORE_DIR")
}
