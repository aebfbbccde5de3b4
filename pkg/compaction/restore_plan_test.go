package compaction

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func planMsg(role string, blocks ...turn.Block) view.Message {
	return view.Message{Role: role, Content: blocks}
}

func planRead(id, path string) turn.Block {
	return turn.Block{Type: turn.BlockToolUse, ID: id, Name: "Read", Input: []byte(`{"file_path":"` + path + `"}`)}
}

func planResult(id, text string, isError bool) turn.Block {
	c := turn.Content{{Type: turn.BlockText, Text: text}}
	return turn.Block{Type: turn.BlockToolResult, ToolUseID: id, Content: &c, IsError: isError}
}

func TestScanTranscriptKeepsTheLatestUsableReadOfEachFile(t *testing.T) {
	t.Parallel()
	all := []view.Message{
		planMsg("assistant", planRead("r1", "/a.go")),
		planMsg("user", planResult("r1", "first read of a", false)),
		planMsg("assistant", planRead("r2", "/a.go")),
		planMsg("user", planResult("r2", "second read of a", false)),
		planMsg("assistant", planRead("r3", "/a.go")),
		planMsg("user", planResult("r3", "no such file", true)), // an error is no content
		planMsg("assistant", planRead("r4", "/b.go")),
		planMsg("user", planResult("r4", clearedResult, false)), // cleared is no content
		planMsg("assistant", turn.Block{Type: turn.BlockToolUse, ID: "e1", Name: "Edit", Input: []byte(`{"file_path":"/a.go"}`)}),
	}
	s := scanTranscript(all, ToolNames{}.withDefaults())
	require.Len(t, s.reads, 1, "only /a.go has a usable read")
	require.Equal(t, "second read of a", s.reads["/a.go"].text)
	require.Equal(t, "r2", s.reads["/a.go"].callID)
	require.Greater(t, s.changed["/a.go"], s.reads["/a.go"].seq, "the edit comes after the read")
}

func TestPickFilesSkipsKeptReadsAndStaysUnderTheTotal(t *testing.T) {
	t.Parallel()
	reads := map[string]*fileRead{
		"/old":   {path: "/old", text: "o", callID: "c1", seq: 1},
		"/big":   {path: "/big", text: string(make([]byte, 400)), callID: "c2", seq: 2},
		"/kept":  {path: "/kept", text: "k", callID: "c3", seq: 3},
		"/fresh": {path: "/fresh", text: "f", callID: "c4", seq: 4},
	}
	k := kept{results: map[string]bool{"c3": true}}
	lim := RestoreLimits{Files: 5, FileTokens: 1000, TotalTokens: 50}.withDefaults()
	files := pickFiles(reads, map[string]int{"/fresh": 9}, k, lim)
	var got []string
	for _, f := range files {
		got = append(got, f.read.path)
	}
	// /big (100 tokens) passes the total of 50 and is skipped; /kept is still
	// in context; the rest come oldest first.
	require.Equal(t, []string{"/old", "/fresh"}, got)
	require.False(t, files[0].stale)
	require.True(t, files[1].stale, "/fresh was written after its read")

	lim.Files = 1
	files = pickFiles(reads, nil, k, lim)
	require.Len(t, files, 1)
	require.Equal(t, "/fresh", files[0].read.path, "the most recent read wins the only place")
}
