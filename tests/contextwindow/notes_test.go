package contextwindow_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm/llmtest"
	"github.com/mnemos-ai/mnemos/services/compactor"
)

// TestSessionNotesCompactWithoutTheModel: when the session has notes, they
// are the summary, the messages after the last one they cover stay, and the
// model is never called.
func TestSessionNotesCompactWithoutTheModel(t *testing.T) {
	t.Parallel()
	provider, srv := scripted(t, func(llmtest.Request) llmtest.Reply { return llmtest.ServerError() })
	h := setup(t, provider)
	c := h.conversation("notes")
	var lastCovered, firstKept string
	for round := 1; round <= 30; round++ {
		u := c.user(fmt.Sprintf("Request %d: read file %d.", round, round))
		if round == 21 {
			firstKept = u
		}
		call := fmt.Sprintf("notes-call-%d", round)
		c.respond(t, time.Minute, text("Reading."), toolUse(call, "Read", map[string]any{"file_path": fmt.Sprintf("/src/f%d.go", round)}))
		c.toolResult(call, filler(fmt.Sprintf("f%d", round), 4_000))
		answer := c.respond(t, time.Minute, text(fmt.Sprintf("File %d is fine.", round)))
		if round == 20 {
			lastCovered = answer
		}
	}
	notes := "# Session notes\n\n## Current state\nFiles 1 to 20 were read and are fine."
	_, err := h.store.Pool().Exec(context.Background(),
		`INSERT INTO session_notes (tenant_id, session_id, content, last_summarized_uuid) VALUES ($1, $2, $3, $4)`,
		tenant, "notes", notes, lastCovered)
	require.NoError(t, err)

	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/notes/compact", `{}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "completed", got.Status, got.Error)
	require.Equal(t, compactor.MethodSessionMemory, got.Method)
	require.Equal(t, notes, got.Summary)
	require.Zero(t, srv.Calls(), "no model call")

	var ctx contextBody
	h.get(t, "/v1/sessions/notes/context", &ctx)
	require.Contains(t, ctx.Messages[0].Content[1].Text, "Files 1 to 20 were read and are fine.")
	require.Equal(t, firstKept, ctx.MessageUUIDs[1], "the kept messages start right after the last one the notes cover")
	require.True(t, strings.HasPrefix(ctx.Messages[1].Content[0].Text, "Request 21"))
	require.GreaterOrEqual(t, len(ctx.Messages)-1, 5)
}
