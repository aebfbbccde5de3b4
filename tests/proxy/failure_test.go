package proxy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// The proxy must not become the weak link: with the upstream, Postgres or
// NATS gone, or the client leaving mid-answer, the client gets the
// upstream's answer or a clear error in the Messages API's shape, and the
// session neither loses a message nor counts one twice.

// conversation is a client's side of a session: what it sends each round.
type conversation struct {
	c    sdk.Client
	msgs []sdk.MessageParam
}

func converse(base, apiKey, session string) *conversation {
	return &conversation{c: sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(base), option.WithAPIKey(apiKey),
		option.WithMaxRetries(0), option.WithHeader("X-Mnemos-Session", session))}
}

// round sends the conversation with text added as the user's message and,
// when the answer comes, keeps it in the conversation.
func (cv *conversation) round(t *testing.T, text string) (*sdk.Message, error) {
	t.Helper()
	cv.msgs = append(cv.msgs, userText(text))
	got, err := cv.c.Messages.New(context.Background(), sdk.MessageNewParams{Model: model, MaxTokens: 256, Messages: cv.msgs})
	if err == nil {
		cv.msgs = append(cv.msgs, got.ToParam())
	} else {
		cv.msgs = cv.msgs[:len(cv.msgs)-1] // the client sends it again
	}
	return got, err
}

// streamedRound is round with the answer streamed, read to its end.
func (cv *conversation) streamedRound(t *testing.T, text string) (*sdk.Message, error) {
	t.Helper()
	cv.msgs = append(cv.msgs, userText(text))
	stream := cv.c.Messages.NewStreaming(context.Background(), sdk.MessageNewParams{Model: model, MaxTokens: 256, Messages: cv.msgs})
	var got sdk.Message
	for stream.Next() {
		if err := got.Accumulate(stream.Current()); err != nil {
			return nil, err
		}
	}
	if err := stream.Err(); err != nil {
		cv.msgs = cv.msgs[:len(cv.msgs)-1] // the client sends it again
		return nil, err
	}
	cv.msgs = append(cv.msgs, got.ToParam())
	return &got, nil
}

// echo answers every call the same.
func echo(*upstream.Request) (upstream.Reply, error) { return upstream.Final("noted"), nil }

// storedTexts are a session's stored messages' first texts, in order.
func storedTexts(t *testing.T, st *store.Store, session string) []string {
	t.Helper()
	return queryTexts(t, st, `SELECT coalesce(content->0->>'text', '') FROM messages WHERE tenant_id = $1 AND session_id = $2 ORDER BY position`,
		tenant, session)
}

// queryTexts are the texts a query of the store answers, one a row.
func queryTexts(t *testing.T, st *store.Store, query string, args ...any) []string {
	t.Helper()
	rows, err := pgtest.Admin(t, st).Query(context.Background(), query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestUpstreamDownGetsAnAnthropicError: with nothing listening at the
// upstream's address, the client gets a 502 api_error, streamed or not,
// and nothing is recorded.
func TestUpstreamDownGetsAnAnthropicError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	m := startMnemos(t, gone, key)
	c := converse(m.api.URL, key, "down").c
	params := sdk.MessageNewParams{Model: model, MaxTokens: 64, Messages: []sdk.MessageParam{userText("anyone there?")}}

	_, err = c.Messages.New(context.Background(), params)
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadGateway, apiErr.StatusCode)
	require.Contains(t, apiErr.RawJSON(), `"type":"api_error"`)
	require.Contains(t, apiErr.RawJSON(), "the upstream did not answer")

	stream := c.Messages.NewStreaming(context.Background(), params)
	for stream.Next() {
		t.Fatalf("an event from nowhere: %v", stream.Current())
	}
	require.ErrorAs(t, stream.Err(), &apiErr)
	require.Equal(t, http.StatusBadGateway, apiErr.StatusCode)

	_, err = m.store.GetSession(context.Background(), tenant, "down")
	require.ErrorIs(t, err, store.ErrNotFound, "no round, no session")
	// Counted once the error is written: the client may have it a moment before.
	require.Eventually(t, func() bool { return m.metrics.Sum("mnemos.proxy.requests", "outcome", "upstream_error") == 2 },
		10*time.Second, 10*time.Millisecond, "counted upstream_error")
}

// TestPostgresDownFailsOpen: while Postgres cannot be reached, a session's
// round goes up as the client sent it and the client gets the upstream's
// answer; a tenant that turned proxy.fail_open off gets a 503
// overloaded_error and the upstream is not called. When Postgres is back,
// the next round records the missed one's messages with its own, each once.
func TestPostgresDownFailsOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up := upstream.Start(t, upstream.Config{Script: echo})
	pg, via := linkTo(t, pgtest.URL(t))
	st, err := store.Open(ctx, store.Config{URL: via, MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	m := startMnemosOn(t, st, bustest.New(t), up.URL, key)
	const strictKey = "mnm_proxy_strict_key"
	require.NoError(t, st.EnsureTenant(ctx, "strict", "Strict"))
	require.NoError(t, st.AddAPIKey(ctx, "strict", "test", strictKey))
	require.NoError(t, st.SetTenantSettings(ctx, "strict", []byte(`{"proxy":{"fail_open":false}}`)))

	acme, strict := converse(m.api.URL, key, "pg"), converse(m.api.URL, strictKey, "pg")
	_, err = acme.round(t, "first")
	require.NoError(t, err)
	_, err = strict.round(t, "first")
	require.NoError(t, err, "strict's key and settings are known before Postgres goes")
	waitApplied(t, st, "pg", 1)

	pg.cut()
	calls := len(up.Messages())
	got, err := acme.round(t, "second, while Postgres is away")
	require.NoError(t, err, "fail-open: the upstream's answer")
	require.Equal(t, "noted", got.Content[0].Text)
	require.Len(t, up.Messages()[calls].Request.Messages, 3, "the request went up as the client sent it")
	// The outcome is counted once the answer is relayed: the client may
	// have it a moment before.
	require.Eventually(t, func() bool { return m.metrics.Sum("mnemos.proxy.requests", "outcome", "unmanaged") == 1 },
		10*time.Second, 10*time.Millisecond, "counted unmanaged")

	_, err = strict.round(t, "second, while Postgres is away")
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
	require.Contains(t, apiErr.RawJSON(), `"type":"overloaded_error"`)
	require.Contains(t, apiErr.RawJSON(), "proxy.fail_open is off")
	require.Len(t, up.Messages(), calls+1, "a refused request never reaches the upstream")
	require.EqualValues(t, 1, m.metrics.Sum("mnemos.proxy.requests", "outcome", "refused"))

	postgresBack(t, pg, st, func(text string) error { _, err := acme.round(t, text); return err })
}

// postgresBack brings Postgres back and sends session pg's third round by
// send: the round of the first and of the second, sent while Postgres was
// away, are recorded with it, six messages, each once.
func postgresBack(t *testing.T, pg *link, st *store.Store, send func(text string) error) {
	t.Helper()
	pg.restore()
	require.Eventually(t, func() bool { _, err := st.GetSession(context.Background(), tenant, "pg"); return err == nil },
		30*time.Second, 50*time.Millisecond, "Postgres answers again")
	require.NoError(t, send("third, Postgres is back"))
	sess := waitApplied(t, st, "pg", 2)
	require.EqualValues(t, 6, sess.MessageCount, "three rounds, six messages, none twice")
	require.Equal(t, []string{"first", "noted", "second, while Postgres is away", "noted", "third, Postgres is back", "noted"},
		storedTexts(t, st, "pg"))
}

// TestNATSDownPublishesTheRoundWhenBack: while NATS cannot be reached, a
// managed round still answers the client, its turn waits in the outbox,
// and once NATS is back it is published and applied once.
func TestNATSDownPublishesTheRoundWhenBack(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{Script: echo})
	cfg := bustest.Config(t)
	nats, via := linkTo(t, cfg.URL)
	cfg.URL = via
	m := startMnemosOn(t, pgtest.New(t), bustest.Connect(t, cfg), up.URL, key)

	cv := converse(m.api.URL, key, "nats")
	_, err := cv.round(t, "first")
	require.NoError(t, err)
	waitApplied(t, m.store, "nats", 1)

	nats.cut()
	got, err := cv.round(t, "second, while NATS is away")
	require.NoError(t, err)
	require.Equal(t, "noted", got.Content[0].Text)
	// The client has its answer before the round is recorded.
	require.Eventually(t, func() bool { return m.metrics.Sum("mnemos.proxy.requests", "outcome", "managed") == 2 },
		10*time.Second, 10*time.Millisecond, "managed: Postgres was there")
	// Other events may wait beside it (the first round's accounted event,
	// if its relay had not run yet): count the session's turns only.
	var waiting int
	require.NoError(t, pgtest.Admin(t, m.store).QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE subject LIKE '%turn.completed.' || $1 || '.nats'`, tenant).Scan(&waiting))
	require.Equal(t, 1, waiting, "the round's turn waits in the outbox")
	sess, err := m.store.GetSession(context.Background(), tenant, "nats")
	require.NoError(t, err)
	require.EqualValues(t, 1, sess.AppliedSeq, "nothing applied without the bus")

	nats.restore()
	sess = waitApplied(t, m.store, "nats", 2)
	require.EqualValues(t, 4, sess.MessageCount)
	require.Equal(t, []string{"first", "noted", "second, while NATS is away", "noted"}, storedTexts(t, m.store, "nats"))
}

// TestClientLeavingMidStreamRecordsNothing: a client that leaves after the
// first events of a streamed answer did not get the round, so it is not
// recorded; the same request sent again is, once.
func TestClientLeavingMidStreamRecordsNothing(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A long answer, streamed slowly. ", 20)
	up := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) { return upstream.Final(long), nil },
		EventDelay: 50 * time.Millisecond})
	m := startMnemos(t, up.URL, key)
	c := converse(m.api.URL, key, "leaving").c
	params := sdk.MessageNewParams{Model: model, MaxTokens: 1024, Messages: []sdk.MessageParam{userText("tell me everything")}}

	ctx, cancel := context.WithCancel(context.Background())
	stream := c.Messages.NewStreaming(ctx, params)
	require.True(t, stream.Next(), "the first event arrives: %v", stream.Err())
	cancel() // the client leaves mid-answer
	for stream.Next() {
	}
	require.Eventually(t, func() bool { return m.metrics.Sum("mnemos.proxy.requests", "outcome", "client_gone") == 1 },
		30*time.Second, 20*time.Millisecond, "Mnemos saw the client leave")
	_, err := m.store.GetSession(context.Background(), tenant, "leaving")
	require.ErrorIs(t, err, store.ErrNotFound, "a round the client did not get is not recorded")

	stream = c.Messages.NewStreaming(context.Background(), params)
	var msg sdk.Message
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.Equal(t, long, msg.Content[0].Text)
	sess := waitApplied(t, m.store, "leaving", 1)
	require.EqualValues(t, 2, sess.MessageCount, "the question and the whole answer, once")
	require.Len(t, up.Messages(), 2, "the upstream answered twice; the session has one round")
}

// TestARoundWithBlocksOfOtherTypesIsRecorded: a conversation holding a
// block of a type Mnemos does not know (the tool_reference blocks of
// Claude Code's tool search) goes up as the client sent it and its round
// is recorded, the block kept as sent; the next round is managed.
func TestARoundWithBlocksOfOtherTypesIsRecorded(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{Script: echo})
	m := startMnemos(t, up.URL, key)
	send := func(messages string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, m.api.URL+"/v1/messages",
			strings.NewReader(`{"model":"`+model+`","max_tokens":64,"messages":[`+messages+`]}`))
		require.NoError(t, err)
		req.Header.Set("x-api-key", key)
		req.Header.Set("X-Mnemos-Session", "search")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	found := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"tool_reference","tool_name":"mcp__mnemos__memory"}]}]}`
	first := `{"role":"user","content":"find the memory tool"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ToolSearch","input":{"query":"memory"}}]},` + found
	send(first)
	sess := waitApplied(t, m.store, "search", 1)
	require.EqualValues(t, 4, sess.MessageCount, "the round is recorded, not refused")
	var stored string
	require.NoError(t, pgtest.Admin(t, m.store).QueryRow(context.Background(),
		`SELECT content->0->'content'->0->>'tool_name' FROM messages WHERE session_id = 'search' AND position = 2`).Scan(&stored))
	require.Equal(t, "mcp__mnemos__memory", stored, "the block is kept as sent")

	send(first + `,{"role":"assistant","content":[{"type":"text","text":"noted"}]},{"role":"user","content":"now use it"}`)
	waitApplied(t, m.store, "search", 2)
	calls := up.Messages()
	require.Len(t, calls, 2)
	require.Contains(t, string(calls[1].Body), `"tool_reference"`, "the managed request still carries the block")
	require.Eventually(t, func() bool { return m.metrics.Sum("mnemos.proxy.requests", "outcome", "managed") == 2 },
		10*time.Second, 10*time.Millisecond, "both rounds counted as managed")
}

// TestTheClientHasItsAnswerBeforeTheRoundIsRecorded: an answer, whole or
// streamed, reaches the client, and a streamed one ends, before Mnemos
// records the round, so recording is not part of the client's wait. The
// upstream here holds the session's row locked from the moment it answers:
// the client still gets its answers, two rounds of them, whose records wait
// for the lock and are made once it is let go, in the order of the rounds.
func TestTheClientHasItsAnswerBeforeTheRoundIsRecorded(t *testing.T) {
	t.Parallel()
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed=%v", streamed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			up := upstream.Start(t, upstream.Config{Script: echo})
			m := startMnemos(t, up.URL, key)
			cv := converse(m.api.URL, key, "unhurried")
			_, err := cv.round(t, "first")
			require.NoError(t, err)
			waitApplied(t, m.store, "unhurried", 1)

			admin := pgtest.Admin(t, m.store)
			hold, err := admin.Begin(ctx)
			require.NoError(t, err)
			defer hold.Rollback(ctx) //nolint:errcheck // let go below; a second rollback does nothing
			up.SetScript(func(r *upstream.Request) (upstream.Reply, error) {
				_, err := hold.Exec(ctx, `SELECT 1 FROM sessions WHERE tenant_id = $1 AND session_id = 'unhurried' FOR UPDATE`, tenant)
				if err != nil {
					return upstream.Reply{}, err
				}
				return echo(r)
			})

			for _, text := range []string{"second", "third"} {
				answered := make(chan error, 1)
				go func() {
					round := cv.round
					if streamed {
						round = cv.streamedRound
					}
					got, err := round(t, text)
					if err == nil && (len(got.Content) != 1 || got.Content[0].Text != "noted") {
						err = fmt.Errorf("the answer is not the upstream's: %+v", got.Content)
					}
					answered <- err
				}()
				select {
				case err := <-answered:
					require.NoError(t, err)
				case <-time.After(30 * time.Second):
					t.Fatal("the client waited for the round to be recorded")
				}
			}
			sess, err := m.store.GetSession(ctx, tenant, "unhurried")
			require.NoError(t, err)
			require.EqualValues(t, 1, sess.ProxySeq, "the rounds wait for the session's lock")

			require.NoError(t, hold.Rollback(ctx))
			waitApplied(t, m.store, "unhurried", 3)
			require.Equal(t, []string{"first", "noted", "second", "noted", "third", "noted"}, storedTexts(t, m.store, "unhurried"))
		})
	}
}
