package tokens_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// sample is a text of one kind the counters are measured on. Every sample
// is the project's own: prose written for these tests, this package's Go
// source, JSON and logs built here.
type sample struct {
	name, text string
}

func samples(t testing.TB) []sample {
	t.Helper()
	read := func(path string) string {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(b)
	}
	type call struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Cwd     string   `json:"cwd"`
		Timeout int      `json:"timeout_ms"`
		Env     []string `json:"env"`
	}
	var calls []call
	for i := range 40 {
		calls = append(calls, call{Command: "go", Args: []string{"test", "-run", fmt.Sprintf("TestCase%d", i), "./pkg/tokens/..."},
			Cwd: "/work/repo", Timeout: 120_000 + i, Env: []string{"GOFLAGS=-count=1", fmt.Sprintf("SHARD=%d", i%4)}})
	}
	js, err := json.Marshal(calls)
	require.NoError(t, err)
	var logs strings.Builder
	for i := range 60 {
		fmt.Fprintf(&logs, "2026-12-06T13:%02d:%02dZ INFO proxy request tenant=acme session=s-%04x status=%d took=%dms bytes=%d\n",
			i/60, i%60, i*7919%65536, 200+(i%3)*100, 3+i*13%400, 1000+i*4099%90000)
	}
	raw := make([]byte, 1500)
	for i := range raw {
		raw[i] = byte(i*131 + i/7)
	}
	return []sample{
		{"prose", read(filepath.Join("testdata", "samples", "prose.txt"))},
		{"german", read(filepath.Join("testdata", "samples", "german.txt"))},
		{"japanese", read(filepath.Join("testdata", "samples", "japanese.txt"))},
		{"go", read("tally.go") + read("limits.go")},
		{"json", string(js)},
		{"logs", logs.String()},
		{"base64", base64.StdEncoding.EncodeToString(raw)},
	}
}

// TestO200kRoundTrip: o200k_base encodes every sample into tokens that
// decode to the very same text; the count is the number of tokens, at
// least one and at most one per byte (BPE only merges bytes).
func TestO200kRoundTrip(t *testing.T) {
	t.Parallel()
	c := codec.NewO200kBase()
	counter := tokens.O200k()
	require.Equal(t, "o200k_base", counter.Name())
	extra := []sample{
		{"emoji", "ship it 🚀🚀 — done ✅ naïve café"},
		{"special token as text", "<|endoftext|> is text here, not a control token"},
		{"whitespace", "a\n\n\n    b\t\t c  \r\n"},
	}
	for _, s := range append(samples(t), extra...) {
		ids, _, err := c.Encode(s.text)
		require.NoError(t, err, s.name)
		back, err := c.Decode(ids)
		require.NoError(t, err, s.name)
		require.Equal(t, s.text, back, "%s decodes to itself", s.name)
		n := counter.Text(s.text)
		require.Equal(t, int64(len(ids)), n, s.name)
		require.GreaterOrEqual(t, n, int64(1), s.name)
		require.LessOrEqual(t, n, int64(len(s.text)), s.name)
	}
	require.Zero(t, counter.Text(""))
}

// TestO200kKnownCounts: counts that follow from the encoding's published
// rules rather than from running it. Its pre-tokenizer cuts a run of digits
// into groups of at most three (\p{N}{1,3}), and every group of one to
// three ASCII digits is a token of its own: n digits are ceil(n/3) tokens.
// A lower-case word after a space is one piece, and pieces are encoded
// apart, so a word repeated k times is k times the word's count.
func TestO200kKnownCounts(t *testing.T) {
	t.Parallel()
	counter := tokens.O200k()
	for _, group := range []string{"0", "7", "42", "000", "123", "999"} {
		require.Equal(t, int64(1), counter.Text(group), group)
	}
	digits := "31415926535897932384626433832795028841971693993751"
	for n := 1; n <= len(digits); n++ {
		require.Equal(t, int64((n+2)/3), counter.Text(digits[:n]), "%d digits", n)
	}
	one := counter.Text(" mnemos")
	require.Equal(t, 1000*one, counter.Text(strings.Repeat(" mnemos", 1000)))
	require.Equal(t, int64(2), counter.Text("hello world"), `"hello" and " world", two of the commonest English tokens`)
	// A space before digits is a piece of its own (\p{N} never takes it).
	require.Equal(t, int64(5), counter.Text("hello world 123456"))
	_, pieces, err := codec.NewO200kBase().Encode("hello world 123456")
	require.NoError(t, err)
	require.Equal(t, []string{"hello", " world", " ", "123", "456"}, pieces)
}

// TestCounterContent: a counter counts a message block by block, as the
// estimate does; the dense part is what the estimate calls dense.
func TestCounterContent(t *testing.T) {
	t.Parallel()
	o := tokens.O200k()
	result := turn.Content{{Type: turn.BlockText, Text: `{"files": ["a.go", "b.go"], "count": 2}`}}
	content := turn.Content{
		{Type: turn.BlockText, Text: "Run the tests, please."},
		{Type: turn.BlockToolUse, ID: "call_1", Name: "exec_command", Input: json.RawMessage(`{"cmd":["go","test","./..."]}`)},
		{Type: turn.BlockToolResult, ToolUseID: "call_1", Content: &result},
		{Type: turn.BlockImage},
		{Type: turn.BlockThinking, Thinking: "The tests pass; say so."},
	}
	want := o.Text("Run the tests, please.") +
		o.Text("exec_command") + o.Text(`{"cmd":["go","test","./..."]}`) +
		o.Text(`{"files": ["a.go", "b.go"], "count": 2}`) +
		tokens.MediaTokens +
		o.Text("The tests pass; say so.")
	wantDense := o.Text("exec_command") + o.Text(`{"cmd":["go","test","./..."]}`) + o.Text(`{"files": ["a.go", "b.go"], "count": 2}`)
	total, dense := o.Content(content)
	require.Equal(t, want, total)
	require.Equal(t, wantDense, dense)

	total, dense = tokens.Estimator.Content(content)
	wantTotal, wantDenseEst := tokens.EstimateSplit(content)
	require.Equal(t, wantTotal, total)
	require.Equal(t, wantDenseEst, dense)

	// A Tally counts either the same way: the rule does not change.
	var a, b tokens.Tally
	a.AddMessage(turn.Message{Content: content})
	b.AddSplit(tokens.Estimator.Content(content))
	require.Equal(t, a, b)
}

// TestO200kConcurrent: one counter serves many goroutines with the counts
// it gives one.
func TestO200kConcurrent(t *testing.T) {
	t.Parallel()
	o := tokens.O200k()
	ss := samples(t)
	want := make([]int64, len(ss))
	for i, s := range ss {
		want[i] = o.Text(s.text)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(ss))
	for range 8 {
		wg.Go(func() {
			for i, s := range ss {
				if got := o.Text(s.text); got != want[i] {
					errs <- fmt.Sprintf("%s: %d, want %d", s.name, got, want[i])
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestO200kLongRuns: texts that are one long piece (a run of one letter,
// of spaces, base64 with no breaks) count in bounded time: the merge is
// O(n log n) in a piece's length.
func TestO200kLongRuns(t *testing.T) {
	t.Parallel()
	raw := make([]byte, 150_000)
	for i := range raw {
		raw[i] = byte(i * 2654435761 >> 13)
	}
	for name, text := range map[string]string{
		"letters": strings.Repeat("a", 200_000),
		"spaces":  strings.Repeat(" ", 200_000),
		"base64":  base64.StdEncoding.EncodeToString(raw),
	} {
		start := time.Now()
		n := tokens.O200k().Text(text)
		took := time.Since(start)
		t.Logf("%s: %d bytes, %d tokens, %v", name, len(text), n, took)
		require.Positive(t, n, name)
		require.Less(t, took, 10*time.Second, name)
	}
}

// TestEstimateCalibration measures the estimate against o200k_base on the
// samples: the estimate's rates by kind should land near the tokenizer's,
// and a Tally whose usage is the tokenizer's count learns the rest.
func TestEstimateCalibration(t *testing.T) {
	t.Parallel()
	o := tokens.O200k()
	bounds := map[string][2]float64{
		// estimate / o200k: above 1 is an over-count (safe), below an under-count.
		"prose":    {0.9, 1.3},
		"german":   {0.8, 1.5},
		"japanese": {0.8, 3.0},
		"go":       {0.9, 1.6},
		"json":     {0.9, 2.5},
		"logs":     {0.8, 1.6},
		"base64":   {0.7, 1.6},
	}
	for _, s := range samples(t) {
		est := tokens.Estimator.Text(s.text)
		exact := o.Text(s.text)
		ratio := float64(est) / float64(exact)
		if s.name == "json" {
			// JSON is counted at its own rate only as a tool's input or result.
			est, _ = tokens.Estimator.Content(turn.Content{{Type: turn.BlockToolUse, Input: json.RawMessage(s.text)}})
			ratio = float64(est) / float64(exact)
		}
		t.Logf("%-8s %6d bytes  o200k %5d (%.2f bytes/token)  estimate %5d  estimate/o200k %.2f",
			s.name, len(s.text), exact, float64(len(s.text))/float64(exact), est, ratio)
		b := bounds[s.name]
		require.GreaterOrEqual(t, ratio, b[0], s.name)
		require.LessOrEqual(t, ratio, b[1], s.name)
	}

	// A session of prose and code whose upstream counts with o200k: after a
	// few responses the calibrated estimate of the next round is within 5%
	// of the tokenizer's, whatever the raw estimate's error.
	ss := samples(t)
	prose, code := ss[0].text, ss[3].text
	var tally tokens.Tally
	input := int64(0)
	msg := func(text string) turn.Message {
		return turn.Message{Content: turn.Content{{Type: turn.BlockText, Text: text}}}
	}
	for round := range 6 {
		m := msg(prose)
		if round%2 == 1 {
			m = msg(code)
		}
		tally.AddMessage(m)
		exact, _ := o.Content(m.Content)
		input += exact
		tally.SetResponse(turn.Usage{InputTokens: input}, nil)
	}
	for _, text := range []string{prose, code} {
		next := tally
		next.AddMessage(msg(text))
		exact := o.Text(text)
		got := next.Count() - next.Baseline
		t.Logf("calibrated estimate of the next round %d, o200k %d (factors %.3f, %.3f)", got, exact, tally.Factor, tally.DenseFactor)
		require.InDelta(t, 1, float64(got)/float64(exact), 0.05)
	}
	require.False(t, math.IsNaN(tally.Factor))
}

// BenchmarkCounter: the tokenizer's and the estimate's cost per sample.
func BenchmarkCounter(b *testing.B) {
	ss := samples(b)
	start := time.Now()
	o := tokens.O200k()
	b.Logf("o200k_base built in %v", time.Since(start))
	for _, c := range []tokens.Counter{o, tokens.Estimator} {
		for _, s := range ss {
			b.Run(c.Name()+"/"+s.name, func(b *testing.B) {
				b.SetBytes(int64(len(s.text)))
				b.ReportAllocs()
				for b.Loop() {
					c.Text(s.text)
				}
			})
		}
	}
}
