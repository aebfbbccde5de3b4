package assembly_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// results builds n results in conversation order, ids r0..r{n-1}, each
// saving the given tokens (the last one's saving repeats when savings is short).
func results(n int, savings ...int64) []assembly.Result {
	out := make([]assembly.Result, n)
	for i := range out {
		s := savings[min(i, len(savings)-1)]
		out[i] = assembly.Result{ToolUseID: fmt.Sprintf("r%d", i), Message: 2 * i, Block: 0, Tokens: s + 9, ClearedTokens: 9}
	}
	return out
}

func TestBySize(t *testing.T) {
	t.Parallel()

	const warning = 147_000
	tests := []struct {
		name    string
		results []assembly.Result
		count   int64
		keep    int
		want    []string
	}{
		{"exactly at warning: nothing", results(6, 10_000), warning, 3, nil},
		{"below warning: nothing", results(6, 10_000), warning - 1, 3, nil},
		// The three older results save 6,667 + 6,666 + 6,666 = 19,999.
		{"saving 19,999: nothing", results(6, 6_667, 6_666), warning + 1, 3, nil},
		{"saving 20,000: clears all but 3", results(6, 6_667, 6_667, 6_666), warning + 1, 3, []string{"r0", "r1", "r2"}},
		{"far above warning, big saving", results(10, 5_000), 190_000, 3, []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6"}},
		{"only 3 results: nothing to clear", results(3, 50_000), warning + 1, 3, nil},
		{"keep 0 clears every result", results(2, 10_000), warning + 1, 0, []string{"r0", "r1"}},
		{"negative keep acts as 0", results(2, 10_000), warning + 1, -4, []string{"r0", "r1"}},
		// r1 would grow when cleared: it is left alone and saves nothing.
		{"results that would not shrink are skipped", results(5, 20_000, -5, 0), warning + 1, 2, []string{"r0"}},
		{"no results", nil, warning + 1, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, assembly.BySize(tt.results, tt.count, warning, tt.keep, 20_000))
		})
	}
}

func TestBySizeUsesConversationOrder(t *testing.T) {
	t.Parallel()

	rs := results(5, 30_000)
	rs[0], rs[4] = rs[4], rs[0] // given out of order: r4 is still the most recent
	require.Equal(t, []string{"r0", "r1"}, assembly.BySize(rs, 200_000, 147_000, 3, 20_000))
}

func TestByTime(t *testing.T) {
	t.Parallel()

	last := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		results []assembly.Result
		last    time.Time
		now     time.Time
		want    []string
	}{
		{"exactly 60m: nothing", results(8, 100), last, last.Add(60 * time.Minute), nil},
		{"60m+1s: clears all but 5", results(8, 100), last, last.Add(60*time.Minute + time.Second), []string{"r0", "r1", "r2"}},
		{"59m: nothing", results(8, 100), last, last.Add(59 * time.Minute), nil},
		{"a day idle, few results", results(5, 100), last, last.Add(24 * time.Hour), nil},
		{"a day idle, six results", results(6, 100), last, last.Add(24 * time.Hour), []string{"r0"}},
		// Any saving counts; no minimum applies to clearing by time.
		{"small savings still cleared", results(7, 1), last, last.Add(2 * time.Hour), []string{"r0", "r1"}},
		{"results that would not shrink are skipped", results(7, 0, 1), last, last.Add(2 * time.Hour), []string{"r1"}},
		{"no response yet: nothing", results(8, 100), time.Time{}, last, nil},
		{"clock behind the last response: nothing", results(8, 100), last, last.Add(-2 * time.Hour), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, assembly.ByTime(tt.results, tt.last, tt.now, 60*time.Minute, 5))
		})
	}
}

// TestByTimeKeepsAtLeastOne: whatever idle_keep says, clearing by time
// keeps the most recent result, the one the agent most likely still needs.
func TestByTimeKeepsAtLeastOne(t *testing.T) {
	t.Parallel()

	last := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, keep := range []int{0, -1} {
		require.Equal(t, []string{"r0", "r1", "r2"}, assembly.ByTime(results(4, 100), last, last.Add(2*time.Hour), time.Hour, keep), "keep %d", keep)
	}
	require.Nil(t, assembly.ByTime(results(1, 100), last, last.Add(2*time.Hour), time.Hour, 0), "a lone result stays")
}

func TestCompactable(t *testing.T) {
	t.Parallel()

	body := strings.Repeat("x", 400) // 100 tokens; cleared: 33 bytes, 9 tokens
	msgs := []view.Message{
		stored("a1", 0, "assistant", text("let me look"), toolUse("read", "Read"), toolUse("task", "Task"),
			toolUse("bash", "Bash"), toolUse("grep", "Grep")),
		stored("u1", 1, "user",
			toolResult("read", body),
			toolResult("task", body),    // not a compactable tool
			toolResult("bash", body),    // already cleared
			toolResult("unknown", body), // no tool_use for it
			toolResult("later", body),   // its tool_use comes after it
			toolResult("grep", body),
			toolResult("read", "duplicate answer"), // listed once
		),
		stored("a2", 2, "assistant", toolUse("later", "Read"), toolUse("glob", "Glob")),
		stored("u2", 3, "user", text("and"), toolResult("glob", `{"files":["a","b"]}`)),
		// A tool_result in an assistant message is not a user's tool result.
		stored("a3", 4, "assistant", toolResult("glob", body)),
	}
	got := assembly.Compactable(msgs, assembly.DefaultToolSet(), map[string]bool{"bash": true})
	require.Equal(t, []assembly.Result{
		{ToolUseID: "read", Message: 1, Block: 0, Tokens: 100, ClearedTokens: 9},
		{ToolUseID: "grep", Message: 1, Block: 5, Tokens: 100, ClearedTokens: 9},
		// 19 bytes of JSON count double: 10 tokens.
		{ToolUseID: "glob", Message: 3, Block: 1, Tokens: 10, ClearedTokens: 9},
	}, got)
	require.Equal(t, int64(91), got[0].Saving())
	require.Equal(t, int64(1), got[2].Saving())

	// A tenant's own names replace the defaults.
	custom := []view.Message{
		stored("a1", 0, "assistant", toolUse("t1", "read_file"), toolUse("t2", "Read")),
		stored("u1", 1, "user", toolResult("t1", body), toolResult("t2", body)),
	}
	got = assembly.Compactable(custom, assembly.NewToolSet("read_file"), nil)
	require.Len(t, got, 1)
	require.Equal(t, "t1", got[0].ToolUseID)

	require.Empty(t, assembly.Compactable(custom, assembly.NewToolSet(), nil))
	require.Empty(t, assembly.Compactable(nil, assembly.DefaultToolSet(), nil))
}

func TestCompactableErrorResultKeepsFlagWhenCleared(t *testing.T) {
	t.Parallel()

	failed := toolResult("t1", strings.Repeat("e", 400))
	failed.IsError = true
	msgs := []view.Message{
		stored("a1", 0, "assistant", toolUse("t1", "Bash")),
		stored("u1", 1, "user", failed),
	}
	got := assembly.Compactable(msgs, assembly.DefaultToolSet(), nil)
	require.Len(t, got, 1)
	c := assembly.Render(assembly.Input{Messages: msgs, Cleared: map[string]bool{"t1": true}})
	b := c.Messages[1].Content[0]
	require.True(t, b.IsError)
	require.Equal(t, "t1", b.ToolUseID)
	require.Equal(t, turn.Content{text(assembly.ClearedText)}, *b.Content)
}

// session builds n Read rounds whose results are each size bytes of text.
func session(n, size int) []view.Message {
	var msgs []view.Message
	for i := range n {
		id := fmt.Sprintf("t%d", i)
		msgs = append(msgs,
			stored(fmt.Sprintf("a%d", i), int64(2*i), "assistant", toolUse(id, "Read")),
			stored(fmt.Sprintf("u%d", i), int64(2*i+1), "user", toolResult(id, strings.Repeat("y", size))))
	}
	return msgs
}

func TestDecide(t *testing.T) {
	t.Parallel()

	cfg := assembly.DefaultMicroConfig()
	cfg.CostKeep = 0 // clearing by cost apart (TestByCost…)
	cfg.CacheTTLMinutes = 60
	last := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	soon := last.Add(time.Minute)
	late := last.Add(61 * time.Minute)
	// Each result is 8,000 tokens; clearing one saves 7,991.
	msgs := session(8, 32_000)

	tests := []struct {
		name    string
		cleared map[string]bool
		count   int64
		now     time.Time
		want    []string
	}{
		{"quiet: nothing", nil, 100_000, soon, nil},
		{"by time only", nil, 100_000, late, []string{"t0", "t1", "t2"}},
		{"by size only", nil, 150_000, soon, []string{"t0", "t1", "t2", "t3", "t4"}},
		{"both: the union", nil, 150_000, late, []string{"t0", "t1", "t2", "t3", "t4"}},
		// With t0..t2 cleared, the older of the 5 left (t3, t4) save 15,982: below 20,000.
		{"already cleared not counted again", map[string]bool{"t0": true, "t1": true, "t2": true}, 150_000, soon, nil},
		{"already cleared and idle", map[string]bool{"t0": true}, 100_000, late, []string{"t1", "t2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, cfg.Decide(assembly.MicroInput{Messages: msgs, Cleared: tt.cleared, Count: tt.count, Warning: 147_000, LastResponse: last, Now: tt.now}))
		})
	}
}

func TestDefaultMicroConfig(t *testing.T) {
	t.Parallel()

	cfg := assembly.DefaultMicroConfig()
	require.NoError(t, cfg.Validate())
	require.Equal(t, 3, cfg.SizeKeep)
	require.Equal(t, int64(20_000), cfg.SizeMinSaving)
	require.Equal(t, 5*time.Minute, cfg.Idle(), "the cache's time to live, sooner than idle_minutes")
	require.Equal(t, 2, cfg.CostKeep)
	require.Equal(t, assembly.CachePrices{Read: 0.1, Write: 1.25}, cfg.Prices())
	hour := cfg
	hour.CacheTTLMinutes = 60
	require.Equal(t, 60*time.Minute, hour.Idle())
	require.Equal(t, assembly.CachePrices{Read: 0.1, Write: 2}, hour.Prices())
	require.Equal(t, 5, cfg.IdleKeep)
	require.Equal(t, []string{"Bash", "Edit", "Glob", "Grep", "MultiEdit", "NotebookEdit", "Read", "WebFetch", "WebSearch", "Write",
		"apply_patch", "exec_command", "shell", "write_stdin"}, cfg.Tools.Names())

	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.JSONEq(t, `{"tools":["Bash","Edit","Glob","Grep","MultiEdit","NotebookEdit","Read","WebFetch","WebSearch","Write","apply_patch","exec_command","shell","write_stdin"],
		"size_keep":3,"size_min_saving":20000,"idle_minutes":60,"idle_keep":5,"cost_keep":2,"cache_ttl_minutes":5}`, string(data))
}

// overlay decodes stored over defaults the way tenant settings are decoded.
func overlay(defaults assembly.MicroConfig, stored string) (assembly.MicroConfig, error) {
	out := defaults
	dec := json.NewDecoder(bytes.NewReader([]byte(stored)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return assembly.MicroConfig{}, err
	}
	return out, out.Validate()
}

func TestMicroConfigJSON(t *testing.T) {
	t.Parallel()

	defaults := assembly.DefaultMicroConfig()

	got, err := overlay(defaults, `{"tools":["read_file","run"],"idle_minutes":30,"cache_ttl_minutes":60}`)
	require.NoError(t, err)
	require.Equal(t, []string{"read_file", "run"}, got.Tools.Names())
	require.Equal(t, 30*time.Minute, got.Idle())
	require.Equal(t, 3, got.SizeKeep)
	require.True(t, defaults.Tools.Has("Read"), "decoding replaced the defaults' own set")
	require.False(t, defaults.Tools.Has("run"))

	got, err = overlay(defaults, `{"tools":null}`)
	require.NoError(t, err)
	require.Equal(t, defaults.Tools.Names(), got.Tools.Names())

	got, err = overlay(defaults, `{"tools":[]}`)
	require.NoError(t, err)
	require.Empty(t, got.Tools)

	_, err = overlay(defaults, `{"size_keep":3,"keep":4}`)
	require.ErrorContains(t, err, "unknown field")

	_, err = overlay(defaults, `{"tools":"Read"}`)
	require.ErrorContains(t, err, "want an array of tool names")

	data, err := json.Marshal(got)
	require.NoError(t, err)
	require.Contains(t, string(data), `"tools":[]`)
}

func TestMicroConfigValidate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		change  func(*assembly.MicroConfig)
		wantErr string
	}{
		{"defaults", func(*assembly.MicroConfig) {}, ""},
		{"keep zero is allowed", func(c *assembly.MicroConfig) { c.SizeKeep, c.IdleKeep = 0, 0 }, ""},
		{"no tools is allowed", func(c *assembly.MicroConfig) { c.Tools = nil }, ""},
		{"negative size keep", func(c *assembly.MicroConfig) { c.SizeKeep = -1 }, "size_keep"},
		{"negative min saving", func(c *assembly.MicroConfig) { c.SizeMinSaving = -1 }, "size_min_saving"},
		{"zero idle", func(c *assembly.MicroConfig) { c.IdleMinutes = 0 }, "idle_minutes"},
		{"negative cost keep", func(c *assembly.MicroConfig) { c.CostKeep = -1 }, "cost_keep"},
		{"a time to live the provider has not", func(c *assembly.MicroConfig) { c.CacheTTLMinutes = 30 }, "cache_ttl_minutes"},
		{"negative idle keep", func(c *assembly.MicroConfig) { c.IdleKeep = -1 }, "idle_keep"},
		{"blank tool name", func(c *assembly.MicroConfig) { c.Tools = assembly.NewToolSet("Read", " ") }, "empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := assembly.DefaultMicroConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// reads builds n Read rounds, round i+1 bringing result t<i> of size
// tokens, each message's estimate stored with it as the store keeps it.
func reads(n int, size int64) []view.Message {
	var msgs []view.Message
	for i := range n {
		id := fmt.Sprintf("t%d", i)
		use := stored(fmt.Sprintf("a%d", i), int64(2*i), "assistant", toolUse(id, "Read"))
		res := stored(fmt.Sprintf("u%d", i), int64(2*i+1), "user", toolResult(id, strings.Repeat("y", int(size)*4)))
		use.Round, res.Round = int64(i+1), int64(i+2) // a call's answer, then the next call's result
		use.Tokens, res.Tokens = tokens.EstimateContent(use.Content), tokens.EstimateContent(res.Content)
		msgs = append(msgs, use, res)
	}
	return msgs
}

// TestByCostClearsOnceKeepingThemCostAsMuch: with 9,000-token results and
// two kept, clearing waits until the reads of the clearable results since
// they became clearable pay for rewriting what follows the first of them,
// then clears them all; the arithmetic is the one docs/compaction.md shows.
func TestByCostClearsOnceKeepingThemCostAsMuch(t *testing.T) {
	t.Parallel()

	prices := assembly.CachePrices{Read: 0.1, Write: 1.25}
	decide := func(n int) []string {
		msgs := reads(n, 9_000)
		return assembly.ByCost(msgs, assembly.Compactable(msgs, assembly.DefaultToolSet(), nil), assembly.Pending{}, 2, prices)
	}
	// The next call reads t0..t(n-1); t(i) became clearable with the call
	// that brought t(i+2), so the calls since have read it n-i-2 times for
	// nothing. Clearing rewrites the two kept results and the markers
	// after u0: about 18,200 tokens, at 1.15 more each (20,900). Eight
	// results have wasted 0.1 × 9,000 × (6+5+4+3+2+1) = 18,900; nine,
	// 0.1 × 9,000 × (7+6+5+4+3+2+1) = 25,200.
	for n := 3; n <= 8; n++ {
		require.Nil(t, decide(n), "%d results: keeping them has not cost the rewrite yet", n)
	}
	want := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6"}
	require.Equal(t, want, decide(9), "9 results: every one but the two most recent")

	// Results the client sent that are not stored count among the most
	// recent: with t7 and t8 pending, the stored t0..t6 decide the same.
	msgs := reads(9, 9_000)
	stored, pending := msgs[:14], msgs[14:]
	var p []turn.Message
	for _, m := range pending {
		p = append(p, turn.Message{Role: m.Role, Content: m.Content})
	}
	cfg := assembly.DefaultMicroConfig()
	got := cfg.Decide(assembly.MicroInput{Messages: stored, Pending: p, Count: 90_000, Warning: 147_000})
	require.Equal(t, want, got, "the same decision whether the last rounds are stored or not")

	// Writes that cost twice the input (an hour's entries) wait longer.
	require.Nil(t, assembly.ByCost(msgs, assembly.Compactable(msgs, assembly.DefaultToolSet(), nil), assembly.Pending{}, 2,
		assembly.CachePrices{Read: 0.1, Write: 2}))
}
