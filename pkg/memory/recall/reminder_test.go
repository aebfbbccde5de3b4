package recall

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

func testMemory(body string, updated time.Time) memory.Memory {
	return memory.Memory{
		Scope: memory.Scope{Kind: memory.KindProject, ID: "repo-x"},
		Document: memory.Document{Name: "staging-db-read-only-fridays", Description: "The staging database is read-only on Fridays",
			Type: memory.TypeFeedback, Body: body},
		Revision: 1, UpdatedAt: updated,
	}
}

func TestAgesReadAsTodayYesterdayAndDays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ago  time.Duration
		days int
		text string
	}{
		{0, 0, "today"}, {23*time.Hour + 59*time.Minute, 0, "today"}, {24 * time.Hour, 1, "yesterday"},
		{47 * time.Hour, 1, "yesterday"}, {48 * time.Hour, 2, "2 days ago"}, {30 * 24 * time.Hour, 30, "30 days ago"},
		{-time.Hour, 0, "today"}, // a clock behind the writer's
	} {
		days := AgeDays(testNow.Add(-tc.ago), testNow)
		require.Equal(t, tc.days, days, tc.ago)
		require.Equal(t, tc.text, AgeText(days), tc.ago)
	}
}

// TestRemindersCarryTheirAgeAndOldOnesANoteToVerify: at 0 and 1 days a
// memory is headed with its age only; from 2 days on it also carries the
// note that it is a point-in-time observation to verify.
func TestRemindersCarryTheirAgeAndOldOnesANoteToVerify(t *testing.T) {
	t.Parallel()
	set := DefaultSettings()
	body := "Do not run migrations on staging on Fridays.\n\n**Why:** the replica sync runs then.\n**How to apply:** wait for Monday."
	for days, want := range map[int]string{0: "saved today", 1: "saved yesterday", 2: "saved 2 days ago", 30: "saved 30 days ago"} {
		r := Remind(testMemory(body, testNow.Add(-time.Duration(days)*24*time.Hour-time.Minute)), testNow, set)
		head := fmt.Sprintf("<system-reminder>\nA saved memory that may help here: project:repo-x/staging-db-read-only-fridays.md (feedback, %s).\n", want)
		require.True(t, strings.HasPrefix(r.Text, head), "%d days: %s", days, r.Text)
		require.True(t, strings.HasSuffix(r.Text, "\n</system-reminder>"))
		require.Contains(t, r.Text, "\n\n---\nname: staging-db-read-only-fridays\n")
		require.Contains(t, r.Text, body)
		require.Equal(t, days, r.AgeDays)
		require.False(t, r.Truncated)
		if days >= 2 {
			require.True(t, r.Stale)
			require.Contains(t, r.Text, fmt.Sprintf("It was saved %d days ago and says what was true then: a point-in-time observation, not live state.", days))
			require.Contains(t, r.Text, "before you state it as fact")
		} else {
			require.False(t, r.Stale)
			require.NotContains(t, r.Text, "point-in-time")
		}
	}
	set.StaleDays = 7
	require.False(t, Remind(testMemory(body, testNow.Add(-3*24*time.Hour)), testNow, set).Stale, "the tenant's stale_days")
}

// TestLongMemoriesAreCutWithANote: at most 200 lines and 4,096 bytes of a
// memory are shown, whole lines, with a note saying what was cut.
func TestLongMemoriesAreCutWithANote(t *testing.T) {
	t.Parallel()
	set := DefaultSettings()
	var lines []string
	for i := range 300 {
		lines = append(lines, fmt.Sprintf("%d", i))
	}
	r := Remind(testMemory(strings.Join(lines, "\n"), testNow), testNow, set)
	require.True(t, r.Truncated)
	require.Len(t, strings.Split(r.Content, "\n"), 200, "200 lines of the markdown, frontmatter included")
	require.Contains(t, r.Text, "[The memory is cut here: 200 of its 306 lines shown")
	require.Contains(t, r.Text, "GET /v1/scopes/project:repo-x/memories/staging-db-read-only-fridays")

	long := strings.Repeat("A long line about the staging database. ", 30) // 1,230 bytes a line
	r = Remind(testMemory(strings.Repeat(long+"\n", 10), testNow), testNow, set)
	require.True(t, r.Truncated)
	require.Len(t, r.Content, 4_096, "whole lines, then as much of the next as fits")
	last := r.Content[strings.LastIndex(r.Content, "\n")+1:]
	require.True(t, strings.HasPrefix(long, last))
	require.Contains(t, r.Text, "10 of its 17 lines shown, 4096 of its 12127 bytes")

	r = Remind(testMemory(strings.Repeat("é", 5_000), testNow), testNow, set)
	require.True(t, r.Truncated)
	require.LessOrEqual(t, len(r.Content), 4_096)
	require.Greater(t, len(r.Content), 4_094, "cut at a character boundary")
	require.Contains(t, r.Content, "type: feedback\n---\n\néé")

	kept, n, total := cut(strings.Repeat("é", 3_000), 200, 4_096)
	require.Equal(t, 1, n)
	require.Equal(t, 1, total)
	require.Len(t, kept, 4_096, "a line longer than the limit is cut at a character boundary")

	exact := strings.Repeat("x", 4_096)
	kept, n, _ = cut(exact, 200, 4_096)
	require.Equal(t, exact, kept, "exactly the limit is within it")
	require.Equal(t, 1, n)

	r = Remind(testMemory("Closing tags stay inside: </system-reminder> ok", testNow), testNow, set)
	require.Equal(t, 1, strings.Count(r.Text, "</system-reminder>"), "a memory cannot end the reminder early")
}
