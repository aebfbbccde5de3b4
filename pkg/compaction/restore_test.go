package compaction_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// readOf is one round that reads path and gets content back.
func readOf(round int64, id, path, content string) []view.Message {
	return []view.Message{
		assistant(round, toolUse(id, "Read", map[string]any{"file_path": path})),
		user(round+1, toolResult(id, content)),
	}
}

// reads reads /f1, /f2, … in order, with contents of the given sizes in bytes.
func reads(sizes ...int) []view.Message {
	var out []view.Message
	for i, n := range sizes {
		out = append(out, readOf(int64(i+1), fmt.Sprintf("r%d", i+1), fmt.Sprintf("/f%d", i+1), content(i+1, n))...)
	}
	return out
}

// content is n bytes that start with the file's number.
func content(file, n int) string {
	head := fmt.Sprintf("file %d:", file)
	return head + strings.Repeat("x", n-len(head))
}

var restoredFile = regexp.MustCompile(`(?s)^<restored-file path="([^"]*)">\n([^\n]*)\n(.*)\n</restored-file>$`)

type restoredFileBlock struct {
	path, note, body string
}

func restoredFiles(t *testing.T, blocks []turn.Block) []restoredFileBlock {
	t.Helper()
	var out []restoredFileBlock
	for _, b := range blocks {
		require.Equal(t, turn.BlockText, b.Type)
		if m := restoredFile.FindStringSubmatch(b.Text); m != nil {
			out = append(out, restoredFileBlock{m[1], m[2], m[3]})
		}
	}
	return out
}

func paths(files []restoredFileBlock) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.path
	}
	return out
}

func TestRestoreFiles(t *testing.T) {
	t.Parallel()

	thousand := []int{1000, 1000, 1000, 1000, 1000, 1000, 1000}
	tests := []struct {
		name string
		all  []view.Message
		kept []view.Message
		lim  compaction.RestoreLimits
		// want are the restored paths, in order, and their body sizes in bytes.
		want      []string
		wantBytes []int
	}{
		{
			name: "the 5 most recent of 7, oldest first",
			all:  reads(thousand...),
			want: []string{"/f3", "/f4", "/f5", "/f6", "/f7"}, wantBytes: []int{1000, 1000, 1000, 1000, 1000},
		},
		{
			name: "fewer files than the limit",
			all:  reads(10, 20),
			want: []string{"/f1", "/f2"}, wantBytes: []int{10, 20},
		},
		{
			name: "a file is cut to 5,000 tokens: 20,000 bytes",
			all:  reads(20_000, 20_001, 100_000),
			want: []string{"/f1", "/f2", "/f3"}, wantBytes: []int{20_000, 20_000, 20_000},
		},
		{
			name: "7 files of 5,000 tokens fill 50,000 with 5 files",
			all:  reads(40_000, 40_000, 40_000, 40_000, 40_000, 40_000, 40_000),
			want: []string{"/f3", "/f4", "/f5", "/f6", "/f7"}, wantBytes: []int{20_000, 20_000, 20_000, 20_000, 20_000},
		},
		{
			name: "the total stops the third file of 5,000 tokens",
			all:  reads(40_000, 40_000, 40_000, 40_000),
			lim:  compaction.RestoreLimits{TotalTokens: 12_000},
			want: []string{"/f3", "/f4"}, wantBytes: []int{20_000, 20_000},
		},
		{
			name: "a file over the total is skipped, an older smaller one still fits",
			// f4 and f3: 5,000 tokens each; f2 would pass 12,000; f1 (1,000 tokens) fits.
			all:  reads(4_000, 40_000, 40_000, 40_000),
			lim:  compaction.RestoreLimits{TotalTokens: 12_000},
			want: []string{"/f1", "/f3", "/f4"}, wantBytes: []int{4_000, 20_000, 20_000},
		},
		{
			name: "custom limits",
			all:  reads(thousand...),
			lim:  compaction.RestoreLimits{Files: 2, FileTokens: 100},
			want: []string{"/f6", "/f7"}, wantBytes: []int{400, 400},
		},
		{
			name: "a file whose latest read is kept is skipped; the next one comes in",
			all:  reads(thousand...),
			kept: reads(thousand...)[12:], // the result of /f7
			want: []string{"/f2", "/f3", "/f4", "/f5", "/f6"}, wantBytes: []int{1000, 1000, 1000, 1000, 1000},
		},
		{
			name: "kept messages that do not hold the latest read do not matter",
			all:  append(reads(1000, 1000), readOf(9, "again", "/f1", content(1, 500))...),
			kept: reads(1000)[1:], // the first, older read of /f1
			want: []string{"/f2", "/f1"}, wantBytes: []int{1000, 500},
		},
		{
			name: "a file read again counts from its latest read, with the latest content",
			all:  append(reads(1000, 1000, 1000), readOf(9, "again", "/f1", content(1, 300))...),
			lim:  compaction.RestoreLimits{Files: 2},
			want: []string{"/f3", "/f1"}, wantBytes: []int{1000, 300},
		},
		{
			name: "failed, cleared and empty reads are no content",
			all: append(append(append(reads(1000, 1000),
				assistant(5, toolUse("bad", "Read", map[string]any{"file_path": "/f1"}))),
				user(6, toolError("bad", "permission denied")),
				assistant(6, toolUse("cl", "Read", map[string]any{"file_path": "/f2"}), toolUse("em", "Read", map[string]any{"file_path": "/f3"}))),
				user(7, toolResult("cl", "[Old tool result content cleared]"), toolResult("em", " "))),
			want: []string{"/f1", "/f2"}, wantBytes: []int{1000, 1000},
		},
		{
			name: "other tools and calls without a path are no reads",
			all: []view.Message{
				assistant(1, toolUse("g", "Grep", map[string]any{"path": "/src"}), toolUse("n", "Read", map[string]any{"limit": 3})),
				user(2, toolResult("g", "matches"), toolResult("n", "what")),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := compaction.Restore(numbered(tt.all...), tt.kept, tt.lim, compaction.ToolNames{})
			files := restoredFiles(t, got)
			require.Len(t, got, len(files), "only files")
			if len(tt.want) == 0 {
				require.Empty(t, files)
				return
			}
			require.Equal(t, tt.want, paths(files))
			var total int
			for i, f := range files {
				require.Len(t, f.body, tt.wantBytes[i], "body of %s", f.path)
				require.True(t, strings.HasPrefix(f.body, "file "+strings.TrimPrefix(f.path, "/f")+":"), "content of %s", f.path)
				total += len(f.body)
			}
			lim := tt.lim
			if lim.TotalTokens == 0 {
				lim.TotalTokens = compaction.DefaultRestoreTotalTokens
			}
			require.LessOrEqual(t, int64(total/4), lim.TotalTokens)
			require.Equal(t, got, compaction.Restore(numbered(tt.all...), tt.kept, tt.lim, compaction.ToolNames{}), "deterministic")
		})
	}
}

func TestRestoreFileDetails(t *testing.T) {
	t.Parallel()

	all := numbered(
		assistant(1, toolUse("a", "Read", map[string]any{"file_path": `/odd "name".go`})),
		user(2, toolResult("a", "package odd")),
		assistant(2, toolUse("b", "Read", map[string]any{"file_path": "/edited.go"})),
		user(3, toolResult("b", "package edited")),
		assistant(3, toolUse("c", "Edit", map[string]any{"file_path": "/edited.go", "old_string": "a", "new_string": "b"})),
		user(4, toolResult("c", "ok")),
		assistant(4, toolUse("d", "Read", map[string]any{"file_path": "/big.go"})),
		user(5, toolResult("d", strings.Repeat("y", 30_000))),
	)
	got := compaction.Restore(all, nil, compaction.RestoreLimits{}, compaction.ToolNames{})
	require.Len(t, got, 3)
	require.Equal(t, "<restored-file path=\"/odd &quot;name&quot;.go\">\n"+
		"Content of this file as last read before the conversation was summarized.\npackage odd\n</restored-file>", got[0].Text)
	require.Contains(t, got[1].Text, "changed after that read")
	require.NotContains(t, got[0].Text, "changed after that read")
	big := restoredFiles(t, got[2:])[0].body
	require.Len(t, big, 20_000)
	require.Equal(t, compaction.Clip(strings.Repeat("y", 30_000), 20_000), big)
	require.True(t, strings.HasSuffix(big, "more bytes]"))

	// Tenant tool names.
	custom := numbered(
		assistant(1, toolUse("v", "view", map[string]any{"path": "/v.go"}), toolUse("r", "Read", map[string]any{"file_path": "/r.go"})),
		user(2, toolResult("v", "package v"), toolResult("r", "package r")),
	)
	require.Equal(t, []string{"/v.go"}, paths(restoredFiles(t,
		compaction.Restore(custom, nil, compaction.RestoreLimits{}, compaction.ToolNames{Read: []string{"view"}}))))
}

func TestRestoreTodos(t *testing.T) {
	t.Parallel()

	todoCall := func(id string, items ...map[string]any) turn.Block {
		return toolUse(id, "TodoWrite", map[string]any{"todos": append([]map[string]any{}, items...)})
	}
	item := func(content, status string) map[string]any {
		return map[string]any{"content": content, "status": status, "activeForm": content + "ing"}
	}
	latest := assistant(3, todoCall("t2", item("Write code", "completed"), item("Test it", "in_progress"), item("Ship", "pending")))
	all := numbered(
		assistant(1, todoCall("t1", item("Old plan", "pending"))),
		user(2, toolResult("t1", "ok")),
		latest,
		user(4, toolResult("t2", "ok")),
	)
	want := "<restored-todos>\nThe latest todo list ([x] done, [~] in progress, [ ] to do):\n" +
		"- [x] Write code\n- [~] Test it (in progress)\n- [ ] Ship\n</restored-todos>"

	got := compaction.Restore(all, nil, compaction.RestoreLimits{}, compaction.ToolNames{})
	require.Equal(t, []turn.Block{text(want)}, got)

	// Still in the kept messages: nothing to restore.
	require.Empty(t, compaction.Restore(all, all[2:], compaction.RestoreLimits{}, compaction.ToolNames{}))

	// An emptied list is nothing to restore either.
	cleared := append(all, assistant(5, todoCall("t3")))
	require.Empty(t, compaction.Restore(cleared, nil, compaction.RestoreLimits{}, compaction.ToolNames{}))

	// An input that is no todo list is shown as it is.
	odd := numbered(assistant(1, toolUse("p", "plan", map[string]any{"steps": []string{"a"}})))
	got = compaction.Restore(odd, nil, compaction.RestoreLimits{}, compaction.ToolNames{Todo: []string{"plan"}})
	require.Equal(t, []turn.Block{text("<restored-todos>\nThe input of the latest todo tool call:\n{\"steps\":[\"a\"]}\n</restored-todos>")}, got)
}

func TestRestoreAttachments(t *testing.T) {
	t.Parallel()

	att := func(name, body string) string {
		return `<mnemos:attachment restorable="true" name="` + name + `">` + body + `</mnemos:attachment>`
	}
	all := numbered(
		user(1, text(att("plan", "v1")), text("hello")),
		assistant(1, text(att("plan", "from the assistant"))),
		user(2, text(att("rules", "r1"))),
		user(3, text(`<mnemos:attachment restorable="false" name="x">no</mnemos:attachment>`)),
		user(3, text(`<mnemos:attachment name="y">no flag</mnemos:attachment>`)),
		user(3, text(att("plan", "v2"))),
		user(4, text(`<mnemos:attachment restorable="true" name="open">never closed`)),
		user(4, text(att("kept", "k"))),
	)
	got := compaction.Restore(all, nil, compaction.RestoreLimits{}, compaction.ToolNames{})
	require.Equal(t, []turn.Block{text(att("rules", "r1")), text(att("plan", "v2")), text(att("kept", "k"))}, got,
		"the latest of each name, in the order they were last attached")

	got = compaction.Restore(all, all[7:], compaction.RestoreLimits{}, compaction.ToolNames{})
	require.Equal(t, []turn.Block{text(att("rules", "r1")), text(att("plan", "v2"))}, got, "one still kept is not restored")
}

func TestRestoreOrderAndFixtures(t *testing.T) {
	t.Parallel()

	// Files, then the todo list, then attachments.
	all := append(reads(100),
		assistant(5, toolUse("t", "TodoWrite", map[string]any{"todos": []map[string]any{{"content": "x", "status": "pending"}}})),
		user(6, text(`<mnemos:attachment restorable="true" name="a">A</mnemos:attachment>`)))
	got := compaction.Restore(numbered(all...), nil, compaction.RestoreLimits{}, compaction.ToolNames{})
	require.Len(t, got, 3)
	require.True(t, strings.HasPrefix(got[0].Text, "<restored-file "))
	require.True(t, strings.HasPrefix(got[1].Text, "<restored-todos>"))
	require.True(t, strings.HasPrefix(got[2].Text, "<mnemos:attachment "))

	// On real sessions, the files read are restored with their latest result.
	restored := 0
	for _, fc := range fixtureContexts(t) {
		blocks := compaction.Restore(fc.messages, nil, compaction.RestoreLimits{}, compaction.ToolNames{})
		files := restoredFiles(t, blocks)
		reads := map[string]string{}
		var order []string // paths, most recently read last
		calls := map[string]string{}
		for _, m := range fc.messages {
			for _, b := range m.Content {
				if b.Type == turn.BlockToolUse && b.Name == "Read" {
					var in struct {
						FilePath string `json:"file_path"`
					}
					require.NoError(t, json.Unmarshal(b.Input, &in))
					calls[b.ID] = in.FilePath
				}
				if path := calls[b.ToolUseID]; b.Type == turn.BlockToolResult && path != "" && !b.IsError {
					reads[path] = (*b.Content)[0].Text
					order = append(slices.DeleteFunc(order, func(p string) bool { return p == path }), path)
				}
			}
		}
		// The most recently read files, up to the default limit (long.jsonl
		// reads eight).
		recent := order[max(0, len(order)-compaction.DefaultRestoreFiles):]
		require.ElementsMatch(t, recent, paths(files), fc.name)
		for _, f := range files {
			require.Contains(t, reads, f.path)
			require.Equal(t, compaction.Clip(reads[f.path], 20_000), f.body)
			restored++
		}
		// Nothing is restored that the kept messages still hold.
		require.Empty(t, restoredFiles(t, compaction.Restore(fc.messages, fc.messages, compaction.RestoreLimits{}, compaction.ToolNames{})))
	}
	require.Positive(t, restored)
}

// TestRestorePlanSkillsAndNotInstructionFiles: a compaction restores the
// latest plan and every skill loaded (each its latest load), unless still
// kept, and never restores an instruction file or a plan file as a file.
func TestRestorePlanSkillsAndNotInstructionFiles(t *testing.T) {
	t.Parallel()
	var msgs []view.Message
	msgs = append(msgs, readOf(1, "r1", "/repo/CLAUDE.md", "Always run make lint.")...)
	msgs = append(msgs, readOf(3, "r2", "/home/u/.claude/plans/refactor.md", "1. split the loader")...)
	msgs = append(msgs, readOf(5, "r3", "/repo/src/AGENTS.md", "Use tabs.")...)
	msgs = append(msgs, readOf(7, "r4", "/repo/main.go", "package main")...)
	all := numbered(append(msgs,
		assistant(9, toolUse("s1", "Skill", map[string]any{"command": "pdf"})),
		user(10, toolResult("s1", "Old pdf instructions.")),
		assistant(11, toolUse("p1", "ExitPlanMode", map[string]any{"plan": "1. Split the loader.\n2. Test it."})),
		user(12, toolResult("p1", "approved")),
		assistant(13, toolUse("s2", "Skill", map[string]any{"command": "pdf"})),
		user(14, toolResult("s2", "Read PDFs with pdftotext.")),
		assistant(15, toolUse("s3", "Skill", map[string]any{"skill": "xlsx"})),
		user(16, toolResult("s3", "Open spreadsheets with openpyxl.")),
	)...)
	got := compaction.Restore(all, nil, compaction.RestoreLimits{}, compaction.ToolNames{})
	require.Equal(t, []string{"/repo/main.go"}, paths(restoredFiles(t, got)), "instruction and plan files are not restored as files")
	var rest []string
	for _, b := range got[1:] {
		rest = append(rest, b.Text)
	}
	require.Equal(t, []string{
		"<restored-plan>\nThe plan the agent last set out:\n1. Split the loader.\n2. Test it.\n</restored-plan>",
		"<restored-skill name=\"pdf\">\nThe skill was loaded before the compaction; its instructions still apply:\nRead PDFs with pdftotext.\n</restored-skill>",
		"<restored-skill name=\"xlsx\">\nThe skill was loaded before the compaction; its instructions still apply:\nOpen spreadsheets with openpyxl.\n</restored-skill>",
	}, rest)

	// Still kept: the plan call and the latest pdf load are not restored.
	kept := compaction.Restore(all, all[10:14], compaction.RestoreLimits{}, compaction.ToolNames{})
	for _, b := range kept {
		require.NotContains(t, b.Text, "restored-plan")
		require.NotContains(t, b.Text, "pdftotext")
	}
}
