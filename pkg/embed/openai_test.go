package embed_test

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/embedtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

func newEmbedder(t *testing.T, srv *embedtest.Server, cfg embed.Config) *embed.OpenAI {
	t.Helper()
	cfg.BaseURL = srv.URL + "/v1"
	e, err := embed.NewOpenAI(cfg)
	require.NoError(t, err)
	return e
}

// TestEmbedsInBatchesThroughTheSDK: a list longer than the batch goes in
// several requests, the vectors come back in order, of unit length, and
// texts that share words are closer than texts that share none.
func TestEmbedsInBatchesThroughTheSDK(t *testing.T) {
	t.Parallel()
	srv := embedtest.Start(t, embedtest.Config{Dimensions: 64})
	e := newEmbedder(t, srv, embed.Config{Model: "scripted-embed", Batch: 2})
	require.Zero(t, e.Dimensions(), "unknown before the first answer")
	texts := []string{
		"the release goes out on Tuesday",
		"releases go out on Tuesdays after the stand-up",
		"the database migration failed twice",
		"migrations of the database",
		"a cat sat on the mat",
	}
	vs, err := e.Embed(context.Background(), texts)
	require.NoError(t, err)
	require.Len(t, vs, len(texts))
	require.Equal(t, 64, e.Dimensions())
	for i, v := range vs {
		require.Len(t, v, 64)
		require.InDelta(t, 1, embed.Dot(v, v), 1e-5, "vector %d is of unit length", i)
		require.Equal(t, srv.Vector(texts[i], 64), v, "vector %d is the text's", i)
	}
	require.Greater(t, embed.Dot(vs[0], vs[1]), embed.Dot(vs[0], vs[2]))
	require.Greater(t, embed.Dot(vs[2], vs[3]), embed.Dot(vs[2], vs[4]))

	calls := srv.Calls()
	require.Len(t, calls, 3, "5 texts in batches of 2")
	for _, c := range calls {
		require.Equal(t, "scripted-embed", c.Model)
	}
	require.Equal(t, texts, srv.Inputs())
}

// TestAsksForTheConfiguredDimensions: Dimensions is sent, and an answer of
// another length is refused as a bad response.
func TestAsksForTheConfiguredDimensions(t *testing.T) {
	t.Parallel()
	srv := embedtest.Start(t, embedtest.Config{Dimensions: 64})
	e := newEmbedder(t, srv, embed.Config{Dimensions: 32})
	require.Equal(t, 32, e.Dimensions())
	vs, err := e.Embed(context.Background(), []string{"shorter vectors"})
	require.NoError(t, err)
	require.Len(t, vs[0], 32)
	require.Equal(t, embed.DefaultModel, srv.Calls()[0].Model)
}

// TestErrorsAreClassified: the API's refusals and failures become
// *llm.Error of the status's kind; an empty text is refused before any
// request.
func TestErrorsAreClassified(t *testing.T) {
	t.Parallel()
	var status atomic.Int64
	srv := embedtest.Start(t, embedtest.Config{Fail: func([]string) (int, string) { return int(status.Load()), "scripted failure" }})
	e := newEmbedder(t, srv, embed.Config{})
	for _, c := range []struct {
		status    int
		kind      llm.ErrorKind
		retryable bool
	}{
		{http.StatusTooManyRequests, llm.KindRateLimited, true},
		{http.StatusInternalServerError, llm.KindServer, true},
		{http.StatusUnauthorized, llm.KindAuth, false},
		{http.StatusBadRequest, llm.KindRequest, false},
	} {
		status.Store(int64(c.status))
		_, err := e.Embed(context.Background(), []string{"hello"})
		require.Error(t, err)
		require.Equal(t, c.kind, llm.KindOf(err), "HTTP %d", c.status)
		require.Equal(t, c.retryable, llm.Retryable(err), "HTTP %d", c.status)
		require.Contains(t, err.Error(), "scripted failure")
	}
	before := len(srv.Calls())
	_, err := e.Embed(context.Background(), []string{"fine", ""})
	require.ErrorIs(t, err, embed.ErrEmptyText)
	require.Equal(t, llm.KindRequest, llm.KindOf(err))
	require.Len(t, srv.Calls(), before, "nothing sent")
}

// TestRefusesAnswersItCannotUse: a server that answers too few vectors, a
// repeated index or a non-finite number is a bad response, not a vector.
func TestRefusesAnswersItCannotUse(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"too few":  `{"object":"list","model":"m","data":[{"object":"embedding","index":0,"embedding":[1,0]}],"usage":{"prompt_tokens":1,"total_tokens":1}}`,
		"repeated": `{"object":"list","model":"m","data":[{"object":"embedding","index":0,"embedding":[1,0]},{"object":"embedding","index":0,"embedding":[0,1]}],"usage":{"prompt_tokens":1,"total_tokens":1}}`,
		"ragged":   `{"object":"list","model":"m","data":[{"object":"embedding","index":0,"embedding":[1,0]},{"object":"embedding","index":1,"embedding":[0,1,0]}],"usage":{"prompt_tokens":1,"total_tokens":1}}`,
		"not json": `{"object":"list","data":[`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		e, err := embed.NewOpenAI(embed.Config{BaseURL: srv.URL + "/v1"})
		require.NoError(t, err)
		_, err = e.Embed(context.Background(), []string{"a", "b"})
		require.Equal(t, llm.KindBadResponse, llm.KindOf(err), "%s: %v", name, err)
	}
}

func TestNewRefusesABadConfiguration(t *testing.T) {
	t.Parallel()
	_, err := embed.NewOpenAI(embed.Config{BaseURL: "localhost:8080"})
	require.ErrorContains(t, err, "want an absolute URL")
	_, err = embed.NewOpenAI(embed.Config{BaseURL: "http://localhost:8080/v1", Dimensions: -1})
	require.ErrorContains(t, err, "dimensions")
	require.False(t, embed.Config{}.Enabled())
	require.True(t, embed.Config{BaseURL: "http://x/v1"}.Enabled())
}

// TestLongTextsAreClipped: a text past MaxInputBytes is cut at a rune
// boundary before it is sent.
func TestLongTextsAreClipped(t *testing.T) {
	t.Parallel()
	srv := embedtest.Start(t, embedtest.Config{})
	e := newEmbedder(t, srv, embed.Config{MaxInputBytes: 10})
	_, err := e.Embed(context.Background(), []string{"ééééééééé"}) // 18 bytes
	require.NoError(t, err)
	require.Equal(t, []string{"ééééé"}, srv.Inputs())
	require.Equal(t, "abc", embed.Clip("abcdef", 3))
	require.Equal(t, "é", embed.Clip("éé", 3))
}

func TestEncodeDecodeAndDot(t *testing.T) {
	t.Parallel()
	v := embed.Normalize([]float32{3, 4, 0, -1, 2})
	b := embed.Encode(v)
	require.Len(t, b, 20)
	back, err := embed.Decode(nil, b)
	require.NoError(t, err)
	require.Equal(t, v, back)
	require.InDelta(t, embed.Dot(v, v), embed.DotEncoded(v, b), 1e-6)
	require.InDelta(t, 1, float64(embed.Dot(v, v)), 1e-6)
	_, err = embed.Decode(nil, b[:7])
	require.Error(t, err)
	require.Equal(t, []float32{0, 0}, embed.Normalize([]float32{0, 0}))
	w := embed.Normalize([]float32{-4, 3, 0, 0, 0})
	require.InDelta(t, (3*-4+4*3)/float64(math.Sqrt(30)*5), float64(embed.Dot(v, w)), 1e-6)
}

// TestMeteredCountsCalls: every call is counted by purpose and outcome.
func TestMeteredCountsCalls(t *testing.T) {
	t.Parallel()
	metrics := telemetrytest.New(t)
	var fail atomic.Bool
	srv := embedtest.Start(t, embedtest.Config{Fail: func([]string) (int, string) {
		if fail.Load() {
			return http.StatusServiceUnavailable, "down"
		}
		return 0, ""
	}})
	m, err := embed.Metered(newEmbedder(t, srv, embed.Config{}), metrics.Meter(), embed.PurposeQuery)
	require.NoError(t, err)
	_, err = m.Embed(context.Background(), []string{"one", "two"})
	require.NoError(t, err)
	fail.Store(true)
	_, err = m.Embed(context.Background(), []string{"three"})
	require.Error(t, err)
	require.Equal(t, int64(1), metrics.Sum("mnemos.embed.requests", "outcome", "ok"))
	require.Equal(t, int64(1), metrics.Sum("mnemos.embed.requests", "outcome", string(llm.KindServer)))
	require.Equal(t, int64(3), metrics.Sum("mnemos.embed.texts", "purpose", embed.PurposeQuery))
	require.True(t, strings.HasPrefix(m.Model(), "text-embedding"))
}

func TestBestKeepsTheHighestInOrder(t *testing.T) {
	t.Parallel()
	scores := []float32{0.1, 0.9, 0.5, 0.9, -1, 0.7, 0.2}
	require.Equal(t, []int{1, 3, 5}, embed.Best(scores, 3), "ties keep their order")
	require.Equal(t, []int{1, 3, 5, 2, 6, 0, 4}, embed.Best(scores, 10))
	require.Empty(t, embed.Best(scores, 0))
	require.Empty(t, embed.Best(nil, 3))
	rng := rand.New(rand.NewPCG(1, 2))
	many := make([]float32, 5000)
	for i := range many {
		many[i] = float32(rng.IntN(100))
	}
	got := embed.Best(many, 50)
	want := make([]int, len(many))
	for i := range want {
		want[i] = i
	}
	slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(many[b], many[a]) })
	require.Equal(t, want[:50], got)
}
