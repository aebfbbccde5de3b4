package contextwindow_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
)

// notesSession makes a session of 30 rounds (a request, a Read call with a
// 4,000-byte result, an answer) and returns the uuid of round 20's answer
// and of round 21's request.
func notesSession(t *testing.T, h *harness, id string) (lastCovered, firstKept string) {
	t.Helper()
	c := h.conversation(id)
	for round := 1; round <= 30; round++ {
		u := c.user(fmt.Sprintf("Request %d: read file %d.", round, round))
		if round == 21 {
			firstKept = u
		}
		call := fmt.Sprintf("%s-call-%d", id, round)
		c.respond(t, time.Minute, text("Reading."), toolUse(call, "Read", map[string]any{"file_path": fmt.Sprintf("/src/f%d.go", round)}))
		c.toolResult(call, filler(fmt.Sprintf("f%d", round), 4_000))
		answer := c.respond(t, time.Minute, text(fmt.Sprintf("File %d is fine.", round)))
		if round == 20 {
			lastCovered = answer
		}
	}
	return lastCovered, firstKept
}

// notesDoc is the default template with bodies in some sections.
func notesDoc(t *testing.T, bodies map[string]string) string {
	t.Helper()
	d, err := sessionnotes.ParseTemplate(sessionnotes.DefaultTemplate)
	require.NoError(t, err)
	for i := range d.Sections {
		d.Sections[i].Body = bodies[d.Sections[i].Heading]
	}
	return d.Render()
}

// writeNotes stores a session's notes as the session-memory service does,
// having looked at every turn of the session.
func (h *harness) writeNotes(t *testing.T, session, content, lastCovered string) {
	t.Helper()
	_, err := h.admin.Exec(context.Background(), `
		INSERT INTO session_notes (tenant_id, session_id, content, last_summarized_uuid, version, seen_seq)
		SELECT $1, $2, $3, $4, 1, applied_seq FROM sessions WHERE tenant_id = $1 AND session_id = $2
		ON CONFLICT (tenant_id, session_id) DO UPDATE SET content = $3, last_summarized_uuid = $4, version = session_notes.version + 1`,
		tenant, session, content, lastCovered)
	require.NoError(t, err)
}

// TestSessionNotesCompactWithoutTheModel: when the session has notes, they
// are the summary, the messages after the last one they cover stay, and the
// model is never called.
func TestSessionNotesCompactWithoutTheModel(t *testing.T) {
	t.Parallel()
	provider, srv := scripted(t, func(llmtest.Request) llmtest.Reply { return llmtest.ServerError() })
	h := setup(t, provider)
	lastCovered, firstKept := notesSession(t, h, "notes")
	notes := notesDoc(t, map[string]string{sessionnotes.HeadingState: "Files 1 to 20 were read and are fine."})
	h.writeNotes(t, "notes", notes, lastCovered)

	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/notes/compact", `{}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "completed", got.Status, got.Error)
	require.Equal(t, events.MethodSessionMemory, got.Method)
	require.Equal(t, notes, got.Summary)
	require.Zero(t, srv.Calls(), "no model call")

	var ctx contextBody
	h.get(t, "/v1/sessions/notes/context", &ctx)
	require.Contains(t, ctx.Messages[0].Content[1].Text, "Files 1 to 20 were read and are fine.")
	require.Equal(t, firstKept, ctx.MessageUUIDs[1], "the kept messages start right after the last one the notes cover")
	require.True(t, strings.HasPrefix(ctx.Messages[1].Content[0].Text, "Request 21"))
	require.GreaterOrEqual(t, len(ctx.Messages)-1, 5)
}

// TestOnlyTheEmptyTemplateIsNeverASummary: notes that hold nothing beyond
// their template fall through to the next method.
func TestOnlyTheEmptyTemplateIsNeverASummary(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	lastCovered, _ := notesSession(t, h, "blank")
	h.writeNotes(t, "blank", sessionnotes.DefaultTemplate, lastCovered)
	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/blank/compact", `{}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, events.MethodFull, got.Method)
}

// TestNotesAreCutToTheirLimitsAsASummary: a section over 2,000 tokens is cut
// when the notes become the summary, and the whole stays under 12,000.
func TestNotesAreCutToTheirLimitsAsASummary(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	lastCovered, _ := notesSession(t, h, "big")
	long := strings.Repeat("- a file that was read and matters to the work\n", 900) // about 10,600 tokens
	h.writeNotes(t, "big", notesDoc(t, map[string]string{
		sessionnotes.HeadingState:    "Files 1 to 20 were read.",
		sessionnotes.HeadingFiles:    strings.TrimSpace(long),
		sessionnotes.HeadingWorkflow: strings.TrimSpace(long),
		sessionnotes.HeadingWorklog:  strings.TrimSpace(long),
	}), lastCovered)
	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/big/compact", `{}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, events.MethodSessionMemory, got.Method)
	d, err := sessionnotes.Parse(got.Summary)
	require.NoError(t, err)
	require.NoError(t, d.CheckStructure())
	require.LessOrEqual(t, d.Tokens(), int64(12_000))
	for _, s := range d.Sections {
		require.LessOrEqual(t, (len(s.Body)+3)/4, 2_000, s.Heading)
	}
	files, _ := d.Section(sessionnotes.HeadingFiles)
	require.Contains(t, files.Body, "[… truncated:")
	state, _ := d.Section(sessionnotes.HeadingState)
	require.Equal(t, "Files 1 to 20 were read.", state.Body, "a short section stays whole")
}

// TestCompactionWaitsForARunningNotesUpdate: a compaction that starts while
// the notes are being updated waits for the update and uses its notes.
func TestCompactionWaitsForARunningNotesUpdate(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	c := h.conversation("fresh")
	var covered []string
	for round := 1; round <= 30; round++ {
		c.user(fmt.Sprintf("Request %d: read file %d.", round, round))
		call := fmt.Sprintf("fresh-call-%d", round)
		c.respond(t, time.Minute, text("Reading."), toolUse(call, "Read", map[string]any{"file_path": fmt.Sprintf("/src/f%d.go", round)}))
		c.toolResult(call, filler(fmt.Sprintf("f%d", round), 4_000))
		covered = append(covered, c.respond(t, time.Minute, text(fmt.Sprintf("File %d is fine.", round))))
	}
	h.writeNotes(t, "fresh", notesDoc(t, map[string]string{sessionnotes.HeadingState: "Files 1 to 10 were read."}), covered[9])
	// An update is running: its claim is live.
	_, err := h.admin.Exec(context.Background(),
		`UPDATE session_notes SET update_owner = 'updater', update_lease_until = now() + interval '1 minute' WHERE tenant_id = $1 AND session_id = 'fresh'`, tenant)
	require.NoError(t, err)
	fresh := notesDoc(t, map[string]string{sessionnotes.HeadingState: "Files 1 to 25 were read."})
	done := make(chan error, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		_, err := h.admin.Exec(context.Background(), `
			UPDATE session_notes SET content = $2, last_summarized_uuid = $3, version = version + 1, update_owner = '', update_lease_until = NULL
			WHERE tenant_id = $1 AND session_id = 'fresh'`, tenant, fresh, covered[24])
		done <- err
	}()

	start := time.Now()
	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/fresh/compact", `{}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.NoError(t, <-done)
	require.Equal(t, events.MethodSessionMemory, got.Method)
	require.Equal(t, fresh, got.Summary, "the compaction used the notes the running update wrote")
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond)
}

// TestCompactionWaitsForTheNotesBoundedly: when the notes update does not
// end in time, the compaction goes on with the notes there are.
func TestCompactionWaitsForTheNotesBoundedly(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant, []byte(`{"compaction": {"session_memory": {"wait_seconds": 1}}}`)))
	lastCovered, _ := notesSession(t, h, "stuck")
	notes := notesDoc(t, map[string]string{sessionnotes.HeadingState: "Files 1 to 20 were read."})
	h.writeNotes(t, "stuck", notes, lastCovered)
	_, err := h.admin.Exec(context.Background(),
		`UPDATE session_notes SET update_owner = 'stuck', update_lease_until = now() + interval '10 minutes' WHERE tenant_id = $1 AND session_id = 'stuck'`, tenant)
	require.NoError(t, err)

	start := time.Now()
	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/stuck/compact", `{}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, events.MethodSessionMemory, got.Method)
	require.Equal(t, notes, got.Summary)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "it waited for the update")
}

// TestNotesAPI: GET /v1/sessions/{id}/notes answers the notes as JSON, or
// as markdown, and 404 until they are written.
func TestNotesAPI(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	lastCovered, _ := notesSession(t, h, "api")
	status, raw := h.get(t, "/v1/sessions/api/notes", nil)
	require.Equal(t, 404, status, string(raw))
	require.Contains(t, string(raw), "no notes yet")

	notes := notesDoc(t, map[string]string{sessionnotes.HeadingState: "Files 1 to 20 were read."})
	h.writeNotes(t, "api", notes, lastCovered)
	var got struct {
		SessionID             string `json:"session_id"`
		Content               string `json:"content"`
		Version               int64  `json:"version"`
		LastSummarizedMessage string `json:"last_summarized_message"`
		UpdateRunning         bool   `json:"update_running"`
	}
	status, raw = h.get(t, "/v1/sessions/api/notes", &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, notes, got.Content)
	require.Equal(t, lastCovered, got.LastSummarizedMessage)
	require.EqualValues(t, 1, got.Version)
	require.False(t, got.UpdateRunning)

	req, err := http.NewRequest(http.MethodGet, h.api.URL+"/v1/sessions/api/notes", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.key)
	req.Header.Set("Accept", "text/markdown")
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	md, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, notes, string(md))
	require.Equal(t, "text/markdown; charset=utf-8", resp.Header.Get("Content-Type"))

	status, _ = h.get(t, "/v1/sessions/bad.id/notes", nil)
	require.Equal(t, 400, status)
}

// TestACompactionWithInstructionsFollowsThem: a manual compaction that
// brings instructions is not answered with the session's notes, which
// cannot follow them: the summary is one that can — here the builtin
// provider's, whose extractive summary keeps the lines that name what the
// instructions ask for — and the compaction records the instructions.
func TestACompactionWithInstructionsFollowsThem(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	lastCovered, _ := notesSession(t, h, "asked")
	c := h.conversation("asked")
	c.seq, c.n = 60, 1000
	c.user("Also: the gamma toolchain migration needs the flag --no-cache on step 3.")
	c.respond(t, time.Minute, text("Noted, step 3 of the gamma toolchain migration runs with --no-cache."))
	h.writeNotes(t, "asked", notesDoc(t, map[string]string{sessionnotes.HeadingState: "Files 1 to 20 were read and are fine."}), lastCovered)

	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/asked/compact", `{"instructions": "Keep everything about the gamma toolchain migration."}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "completed", got.Status, got.Error)
	require.Equal(t, events.MethodFull, got.Method, "not the notes")
	require.Contains(t, got.Summary, "The compaction's instructions: > Keep everything about the gamma toolchain migration.")
	require.Contains(t, got.Summary, "- Noted, step 3 of the gamma toolchain migration runs with --no-cache.")
	require.Less(t, got.PostTokens, got.PreTokens)
	var stored struct {
		Instructions string `json:"instructions"`
	}
	h.get(t, "/v1/compactions/"+got.ID, &stored)
	require.Equal(t, "Keep everything about the gamma toolchain migration.", stored.Instructions)
}
