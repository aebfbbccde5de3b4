package searcheval

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return data
}

// TestParseMnemosShape: the documented shape is read as written; dates of
// sessions and turns parse, and the questions whose evidence names no turn
// or that have none are skipped, each with its reason, the others kept.
func TestParseMnemosShape(t *testing.T) {
	ds, shape, skipped, err := Parse(readFixture(t, "mnemos.json"))
	require.NoError(t, err)
	require.Equal(t, ShapeMnemos, shape)
	require.Len(t, ds.Conversations, 1)
	c := ds.Conversations[0]
	require.Equal(t, "garden", c.ID)
	require.Equal(t, 5, ds.Turns())
	require.Equal(t, 2, ds.Sessions())
	require.Equal(t, time.Date(2026, 4, 3, 18, 30, 0, 0, time.UTC), c.Sessions[0].time)
	require.Equal(t, time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC), c.Sessions[1].time)
	require.Equal(t, "Tomas: I bought a secondhand kayak on Saturday.", c.Sessions[1].Turns[0].Document())
	require.Equal(t, []Skipped{
		{Conversation: "garden", Question: "q3", Reason: "evidence D9:1 names no turn of the conversation"},
		{Conversation: "garden", Question: "q4", Reason: "it names no evidence turn"},
	}, skipped)
	require.Equal(t, 2, ds.Questions())
	require.Equal(t, []string{"D1:1", "D1:3"}, c.Questions[1].Evidence)
	require.Equal(t, "multi", c.Questions[1].Kind)
}

// TestParseLoCoMoShape: a file in the public LoCoMo layout is recognised
// as such; its sessions come in the order of their numbers whatever the
// order of the keys, dated by session_N_date_time; its other fields are
// ignored; an evidence string naming two ids is split; a question whose
// evidence names no turn is skipped.
func TestParseLoCoMoShape(t *testing.T) {
	ds, shape, skipped, err := Parse(readFixture(t, "locomo.json"))
	require.NoError(t, err)
	require.Equal(t, ShapeLoCoMo, shape)
	c := ds.Conversations[0]
	require.Equal(t, "pair-1", c.ID)
	require.Len(t, c.Sessions, 2)
	require.Equal(t, "1", c.Sessions[0].ID)
	require.Equal(t, "D1:1", c.Sessions[0].Turns[0].ID)
	require.Equal(t, "Odile", c.Sessions[0].Turns[0].Speaker)
	require.Equal(t, time.Date(2025, 3, 2, 9, 5, 0, 0, time.UTC), c.Sessions[0].time)
	require.Equal(t, time.Date(2025, 3, 14, 16, 10, 0, 0, time.UTC), c.Sessions[1].time)
	require.Len(t, c.Questions, 2)
	require.Equal(t, []string{"D2:1", "D1:2"}, c.Questions[1].Evidence)
	require.Equal(t, "category 2", c.Questions[0].Kind)
	require.Equal(t, []Skipped{{Conversation: "pair-1", Question: "3", Reason: "evidence D7:3 names no turn of the conversation"}}, skipped)
}

// TestParseRefusesBadFiles: what cannot be evaluated is refused with a
// reason that names the place.
func TestParseRefusesBadFiles(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{``, "the file is empty"},
		{`[]`, "empty array"},
		{`"x"`, "not JSON of either shape"},
		{`{"dialogs": []}`, "neither shape"},
		{`{"conversations": []}`, "no conversation"},
		{`{"conversations": [{"id": "a", "sessions": [{"turns": []}]}]}`, "conversation a has no turn"},
		{`{"conversations": [{"id": "a", "sessions": [{"turns": [{"id": "D1:1", "text": "x"}, {"id": "D1:1", "text": "y"}]}]}]}`, "turn id D1:1 is used twice"},
		{`{"conversations": [{"id": "a", "sessions": [{"turns": [{"id": "D1:1", "text": " "}]}]}]}`, "turn D1:1 has no text"},
		{`{"conversations": [{"id": "a", "sessions": [{"turns": [{"text": "x"}]}]}]}`, "a turn has no id"},
		{`{"conversations": [{"id": "a", "sessions": [{"date": "last Tuesday", "turns": [{"id": "1", "text": "x"}]}]}]}`, `session 1: date "last Tuesday"`},
		{`{"conversations": [{"id": "a", "sessions": [{"turns": [{"id": "1", "text": "x"}]}]}, {"id": "a", "sessions": []}]}`, "conversation a: the id is used twice"},
		{`{"conversations": [{"id": "a", "sesions": []}]}`, `unknown field "sesions"`},
		{`[{"conversation": {"session_1": [{"dia_id": "D1:1", "text": "x"}]}, "qa": [{"question": "q", "evidence": "D1:1"}]}]`, "evidence: want a list of turn ids"},
	} {
		_, _, _, err := Parse([]byte(c.data))
		require.ErrorContains(t, err, c.want, c.data)
	}
}
