package replay_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/replay"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// dryRun runs replay.DryRun and decodes its output.
func dryRun(t *testing.T, data []byte, opts replay.Options) []replay.Line {
	t.Helper()
	recs, err := claudecode.Parse(bytes.NewReader(data))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, replay.DryRun(&out, recs, opts))
	var lines []replay.Line
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	for dec.More() {
		var l replay.Line
		require.NoError(t, dec.Decode(&l))
		lines = append(lines, l)
	}
	return lines
}

func indexOf(lines []replay.Line, uuid string) int {
	for i, l := range lines {
		if l.UUID == uuid {
			return i
		}
	}
	return -1
}

// rawResponse is what the test itself reads about one API response.
type rawResponse struct {
	lastUUID string
	usage    map[string]any
	blocks   []any
}

// rawTranscript reads a transcript with encoding/json into maps, apart from
// the importer: the uuids of its user and assistant records, and its API
// responses grouped by message.id, in order of appearance.
func rawTranscript(t *testing.T, data []byte) (conversation []string, responses []*rawResponse) {
	t.Helper()
	byID := map[string]*rawResponse{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
		typ, _ := rec["type"].(string)
		if typ == "system" && rec["subtype"] == "compact_boundary" {
			conversation = append(conversation, rec["uuid"].(string))
		}
		if typ != "user" && typ != "assistant" {
			continue
		}
		conversation = append(conversation, rec["uuid"].(string))
		if typ != "assistant" {
			continue
		}
		msg := rec["message"].(map[string]any)
		require.NotEqual(t, claudecode.SyntheticModel, msg["model"], "fixtures hold API responses only")
		id := msg["id"].(string)
		r := byID[id]
		if r == nil {
			r = &rawResponse{}
			byID[id] = r
			responses = append(responses, r)
		}
		r.lastUUID = rec["uuid"].(string)
		r.usage = msg["usage"].(map[string]any)
		r.blocks = append(r.blocks, msg["content"].([]any)...)
	}
	require.NoError(t, sc.Err())
	return conversation, responses
}

func usageNumber(t *testing.T, usage map[string]any, key string) int64 {
	t.Helper()
	v, ok := usage[key].(float64)
	require.True(t, ok, "usage.%s", key)
	return int64(v)
}

// staleOutputTranscript is a session whose first response kept the usage
// of its stream's start (output_tokens 1) although it holds a long tool
// input, as some versions of the CLI wrote it. The CLI that made the sample
// transcripts writes each response's final usage, so they hold none.
func staleOutputTranscript(t *testing.T) []byte {
	t.Helper()
	tr := claudecodetest.NewTranscript(t, "stale-output")
	tr.User("Write the report.")
	tr.Assistant("msg_1", "claude-sonnet-4-5", claudecodetest.Usage{Input: 3, CacheCreation: 20_000, Output: 1},
		claudecodetest.ToolUse("t1", "Write", map[string]any{"file_path": "/r.md", "content": strings.Repeat("a line of the report\n", 400)}))
	tr.ToolResult("t1", "written")
	tr.Assistant("msg_2", "claude-sonnet-4-5", claudecodetest.Usage{Input: 3, CacheCreation: 2_500, CacheRead: 20_000, Output: 12},
		claudecodetest.Text("Done."))
	return tr.Bytes()
}

// TestDryRunFixturesCountIsLastUsage is the accounting's anchor to reality:
// after the last record of every response, the count is exactly what the
// provider reported for that response (input + cache creation + cache read +
// output), with the output replaced by the estimate of the response's content
// when it is smaller (usage captured at stream start).
func TestDryRunFixturesCountIsLastUsage(t *testing.T) {
	t.Parallel()

	inputs := map[string][]byte{"stale output (synthetic)": staleOutputTranscript(t)}
	for _, name := range claudecodetest.Names {
		data, err := os.ReadFile(claudecodetest.Path(t, name))
		require.NoError(t, err)
		inputs[name] = data
	}
	for _, path := range claudecodetest.SubagentPaths(t, "subagent.jsonl") {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		inputs[path] = data
	}
	replaced := map[string]int{}
	for name, data := range inputs {
		lines := dryRun(t, data, replay.Options{})
		conversation, responses := rawTranscript(t, data)
		require.NotEmpty(t, responses, name)

		require.Len(t, lines, len(conversation), "%s: one line per conversation record", name)
		seen := map[string]bool{}
		for _, l := range lines {
			require.False(t, seen[l.UUID], "%s: %s printed twice", name, l.UUID)
			seen[l.UUID] = true
		}
		for _, id := range conversation {
			require.True(t, seen[id], "%s: %s not printed", name, id)
		}

		for _, r := range responses {
			// Re-encode the blocks as the CLI wrote them: without HTML
			// escaping, which would lengthen tool inputs holding < > &.
			var blocks bytes.Buffer
			enc := json.NewEncoder(&blocks)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(r.blocks))
			var content turn.Content
			require.NoError(t, json.Unmarshal(blocks.Bytes(), &content))
			estimate := tokens.EstimateContent(content)

			output := usageNumber(t, r.usage, "output_tokens")
			if output < estimate {
				output = estimate
				replaced[name]++
			}
			want := usageNumber(t, r.usage, "input_tokens") +
				usageNumber(t, r.usage, "cache_creation_input_tokens") +
				usageNumber(t, r.usage, "cache_read_input_tokens") +
				output

			i := indexOf(lines, r.lastUUID)
			require.GreaterOrEqual(t, i, 0)
			require.Equal(t, "assistant", lines[i].Type)
			require.Equal(t, want, lines[i].Count, "%s: count after the last record %s", name, r.lastUUID)
		}
	}
	require.Equal(t, 1, replaced["stale output (synthetic)"], "the stale output_tokens is replaced by the estimate")
}

func TestDryRunFixtures(t *testing.T) {
	t.Parallel()

	for _, name := range claudecodetest.Names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, err := os.Open(claudecodetest.Path(t, name))
			require.NoError(t, err)
			defer func() { _ = f.Close() }()
			recs, err := claudecode.Parse(f)
			require.NoError(t, err)

			var out bytes.Buffer
			require.NoError(t, replay.DryRun(&out, recs, replay.Options{}))
			t.Logf("mnemos replay --dry-run %s:\n%s", name, out.String()) // shown with -v only

			// Every response is claude-sonnet-4-5: a 200K window.
			limits := tokens.DefaultConfig().Limits("claude-sonnet-4-5", 0, 0)
			states := map[string]int{}
			for l := range strings.Lines(out.String()) {
				var line map[string]any
				require.NoError(t, json.Unmarshal([]byte(l), &line))
				require.ElementsMatch(t, []string{"uuid", "type", "session", "count", "state", "compact"}, keys(line))
				require.Equal(t, recs[0].SessionID, line["session"])
				count := int64(line["count"].(float64))
				require.Equal(t, string(limits.State(count)), line["state"], "count %d", count)
				states[line["state"].(string)]++
				// long.jsonl peaks at 155,686, under the auto-compact threshold.
				require.Equal(t, false, line["compact"])
			}
			if name == "long.jsonl" {
				// The long session crosses the warning threshold before its /compact.
				require.Positive(t, states[string(tokens.StateError)])
			} else {
				require.Equal(t, map[string]int{string(tokens.StateOK): states[string(tokens.StateOK)]}, states,
					"the other sessions stay far below the thresholds")
			}
		})
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestDryRunRoundOrder(t *testing.T) {
	t.Parallel()

	paths := claudecodetest.SubagentPaths(t, "subagent.jsonl")
	require.Len(t, paths, 1)
	data, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	lines := dryRun(t, data, replay.Options{})

	// In the sub-agent's second response (two Read calls) the CLI wrote the
	// first call's tool_result between the response's two records. That
	// result is part of the next round: it is printed after the response's
	// last record, and counted on top of that response's usage.
	recs, err := claudecode.Parse(bytes.NewReader(data))
	require.NoError(t, err)
	var resp []int // indexes of the second response's records
	var ids []string
	for i, r := range recs {
		if r.IsResponse() && !slices.Contains(ids, r.MessageID) {
			ids = append(ids, r.MessageID)
		}
		if r.IsResponse() && len(ids) == 2 && r.MessageID == ids[1] {
			resp = append(resp, i)
		}
	}
	require.Len(t, resp, 2)
	require.Equal(t, resp[0]+2, resp[1], "one record between the two")
	between := recs[resp[0]+1]
	require.Equal(t, claudecode.TypeUser, between.Type)
	last := indexOf(lines, recs[resp[1]].UUID)
	interleaved := indexOf(lines, between.UUID)
	require.Equal(t, last+1, interleaved)
	require.Equal(t, "user", lines[interleaved].Type)
	require.Greater(t, lines[interleaved].Count, lines[last].Count)

	// Before any usage, the first prompt counts its estimate times 4/3.
	est := tokens.EstimateMessage(recs[0].Message)
	require.Equal(t, recs[0].UUID, lines[0].UUID)
	require.Equal(t, (est*4+2)/3, lines[0].Count)
}

func TestDryRunWindowOverride(t *testing.T) {
	t.Parallel()

	data, err := os.ReadFile(claudecodetest.Path(t, "tool_heavy.jsonl"))
	require.NoError(t, err)
	// The count does not depend on the window; the state does. Pick a window
	// whose auto-compact threshold lies 1,000 below the session's final count:
	// window − 8,000 reserved − 13,000 buffer.
	plain := dryRun(t, data, replay.Options{})
	end := plain[len(plain)-1].Count
	window := end + 8_000 + 13_000 - 1_000
	lines := dryRun(t, data, replay.Options{Window: window, MaxOutput: 8_000})
	final := lines[len(lines)-1]
	require.Equal(t, end, final.Count)
	require.Equal(t, tokens.StateAutoCompact, final.State) // blocking only at window − 8,000 − 3,000
	require.True(t, final.Compact)
	require.False(t, lines[0].Compact)
}

// TestDryRunCompactsFirstAtThreshold replays a long synthetic session: each
// round a response whose usage grows and a tool result of 2,000 tokens. The
// input side grows by exactly the last output and the tool result's
// estimate, so the calibration factor stays 1 and the test tracks the
// expected count itself; compact must turn true exactly at the first record
// whose count reaches 167,000 (200K window), never before.
func TestDryRunCompactsFirstAtThreshold(t *testing.T) {
	t.Parallel()

	const (
		model          = "claude-sonnet-4-5" // 200K window, 64K max output
		autoCompact    = 167_000
		resultBytes    = 8_000 // a plain-text tool result of 2,000 tokens
		outputTokens   = 300   // above the estimate of each response's content
		firstInputSide = 13_500
		growth         = outputTokens + resultBytes/4
	)
	require.Equal(t, int64(autoCompact), tokens.DefaultConfig().Limits(model, 0, 0).AutoCompact)

	tr := claudecodetest.NewTranscript(t, "long-session")
	type want struct {
		uuid  string
		count int64
	}
	var wants []want
	prompt := strings.Repeat("p", 400) // 100 tokens, ×4/3 before any usage
	wants = append(wants, want{tr.User(prompt), (100*4 + 2) / 3})
	for k := int64(0); k < 80; k++ {
		toolID := fmt.Sprintf("toolu_%03d", k)
		inputSide := firstInputSide + growth*k
		u := claudecodetest.Usage{Input: 1, CacheCreation: 2_000, CacheRead: inputSide - 2_001, Output: outputTokens}
		id := tr.Assistant(fmt.Sprintf("msg_%03d", k), model, u,
			claudecodetest.ToolUse(toolID, "Bash", map[string]any{"command": fmt.Sprintf("make step-%d", k)}))
		wants = append(wants, want{id, inputSide + outputTokens})
		tr.Progress()
		res := tr.ToolResult(toolID, strings.Repeat("r", resultBytes))
		wants = append(wants, want{res, inputSide + outputTokens + resultBytes/4})
	}

	first := -1
	for i, w := range wants {
		if w.count >= autoCompact {
			first = i
			break
		}
	}
	require.Positive(t, first, "the synthetic session must cross the threshold")
	require.Less(t, wants[first-1].count, int64(autoCompact))

	lines := dryRun(t, tr.Bytes(), replay.Options{})
	require.Len(t, lines, len(wants))
	for i, w := range wants {
		l := lines[i]
		require.Equal(t, w.uuid, l.UUID, "line %d", i)
		require.Equal(t, w.count, l.Count, "line %d (%s)", i, l.Type)
		require.Equal(t, i >= first, l.Compact, "line %d: count %d", i, l.Count)
	}
	require.Equal(t, "user", lines[first].Type, "this session crosses on a tool result, before the next API call")
	require.Equal(t, tokens.StateAutoCompact, lines[first].State)
	require.Equal(t, tokens.StateError, lines[first-1].State)
	require.Equal(t, tokens.StateBlocking, lines[len(lines)-1].State)
}

func TestDryRunCompactBoundaryRestartsBaseline(t *testing.T) {
	t.Parallel()

	const model = "claude-opus-4-6"
	tr := claudecodetest.NewTranscript(t, "s1")
	tr.User("build it")
	big := claudecodetest.Usage{Input: 5, CacheCreation: 3_000, CacheRead: 165_000, Output: 500}
	tr.Assistant("msg_1", model, big, claudecodetest.ToolUse("t1", "Read", map[string]any{"file_path": "/x"}))
	res := tr.ToolResult("t1", strings.Repeat("x", 4_000)) // 1,000 tokens
	boundary := tr.Boundary("auto", 169_505)
	summary := strings.Repeat("s", 6_000) // 1,500 tokens, ×4/3 = 2,000 until the next response
	sum := tr.CompactSummary(summary)
	next := claudecodetest.Usage{Input: 3, CacheCreation: 2_100, CacheRead: 9_000, Output: 50}
	resp := tr.Assistant("msg_2", model, next, claudecodetest.Text("Picking up where we left off."))

	lines := dryRun(t, tr.Bytes(), replay.Options{})
	require.Len(t, lines, 6)

	require.Equal(t, big.Total(), lines[1].Count, "output 500 is above the tool_use's estimate")
	require.Equal(t, res, lines[2].UUID)
	require.Equal(t, big.Total()+1_000, lines[2].Count)
	require.True(t, lines[2].Compact)
	require.Equal(t, tokens.StateAutoCompact, lines[2].State)

	require.Equal(t, replay.Line{UUID: boundary, Type: "compact_boundary", Session: "s1", Count: 0, State: tokens.StateOK}, lines[3])

	require.Equal(t, sum, lines[4].UUID)
	require.Equal(t, "user", lines[4].Type)
	require.Equal(t, int64(2_000), lines[4].Count, "no usage since the boundary: estimate × 4/3")
	require.False(t, lines[4].Compact)

	require.Equal(t, resp, lines[5].UUID)
	require.Equal(t, next.Total(), lines[5].Count, "the first response after the boundary is the new baseline")
}

func TestDryRunRefusesBadConfig(t *testing.T) {
	t.Parallel()

	cfg := tokens.DefaultConfig()
	cfg.AutoCompactPercent = 150
	err := replay.DryRun(io.Discard, nil, replay.Options{Config: cfg})
	require.ErrorContains(t, err, "auto_compact_percent")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestDryRunReportsWriteErrors(t *testing.T) {
	t.Parallel()

	tr := claudecodetest.NewTranscript(t, "s1")
	tr.User("hello")
	recs, err := claudecode.Parse(tr.Reader())
	require.NoError(t, err)
	require.ErrorContains(t, replay.DryRun(failingWriter{}, recs, replay.Options{}), "disk full")
}

func TestDryRunSidechainHasItsOwnTally(t *testing.T) {
	t.Parallel()

	const model = "claude-opus-4-6"
	tr := claudecodetest.NewTranscript(t, "s1")
	agent := tr.Agent("a1")
	mainUsage := claudecodetest.Usage{Input: 2, CacheCreation: 10_000, CacheRead: 90_000, Output: 400}
	subUsage := claudecodetest.Usage{Input: 3, CacheCreation: 4_000, Output: 100}
	tr.User("delegate this")
	tr.Assistant("msg_m1", model, mainUsage, claudecodetest.ToolUse("t1", "Task", map[string]any{"prompt": "look"}))
	agent.User(strings.Repeat("a", 300)) // 75 tokens, ×4/3 = 100: no usage in this session yet
	agent.Assistant("msg_s1", "claude-haiku-4-5", subUsage, claudecodetest.Text("found it"))
	tr.ToolResult("t1", strings.Repeat("f", 800)) // 200 tokens

	lines := dryRun(t, tr.Bytes(), replay.Options{Session: "replayed"})
	require.Len(t, lines, 5)
	require.Equal(t, "replayed", lines[1].Session)
	require.Equal(t, mainUsage.Total(), lines[1].Count)

	require.Equal(t, "replayed-agent-a1", lines[2].Session)
	require.Equal(t, int64(100), lines[2].Count, "the sub-agent starts from nothing")
	require.Equal(t, "replayed-agent-a1", lines[3].Session)
	require.Equal(t, subUsage.Total(), lines[3].Count)

	require.Equal(t, "replayed", lines[4].Session)
	require.Equal(t, mainUsage.Total()+200, lines[4].Count, "the main session's tally is untouched by the sub-agent")
}
