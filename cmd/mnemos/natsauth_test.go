package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/natsauth"
)

// TestPublishersConnectWithTheirAPIKeys: with MNEMOS_NATS_AUTH_CALLOUT,
// -target=all lets a tenant's backend into its embedded NATS with the
// tenant's API key, and its turn is applied as one sent over HTTP; an
// unknown key is refused. The callout's seed is never shown.
func TestPublishersConnectWithTheirAPIKeys(t *testing.T) {
	t.Parallel()
	issuer, err := nkeys.CreateAccount()
	require.NoError(t, err)
	seed, err := issuer.Seed()
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	natsAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := startAllInOne(t, map[string]string{"MNEMOS_NATS_LISTEN": natsAddr, "MNEMOS_NATS_AUTH_CALLOUT": string(seed)})
	banner := strings.Join(p.banner, "\n")
	require.Contains(t, banner, "nats auth")
	require.NotContains(t, banner, string(seed))

	// A connection waits for the callout's answer, a key checked in
	// Postgres: the client's default 2 s is too short under the race
	// detector on a busy machine (seen in CI as an i/o timeout).
	wait := nats.Timeout(15 * time.Second)
	_, err = nats.Connect("nats://"+natsAddr, nats.UserInfo("dev", "not-a-key"), nats.NoReconnect(), wait)
	require.ErrorIs(t, err, nats.ErrAuthorization, "an unknown key is refused")
	nc, err := nats.Connect("nats://"+natsAddr, nats.UserInfo("dev", "test-dev-key"), nats.CustomInboxPrefix(natsauth.InboxPrefix("dev")), wait)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ev, err := json.Marshal(turn.Event{
		Schema: turn.SchemaV1, EventID: "over-nats-1", SessionID: "over-nats", Seq: 1, OccurredAt: time.Now().UTC(),
		InputMessages: []turn.Message{{UUID: "u1", Role: "user", Content: turn.Content{{Type: "text", Text: "hello"}}}},
		Response:      &turn.Message{UUID: "a1", Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: "text", Text: "hi"}}},
		Usage:         &turn.Usage{InputTokens: 10, OutputTokens: 5},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.Publish(ctx, "turn.completed.dev.over-nats", ev, jetstream.WithMsgID("dev:over-nats-1"))
	require.NoError(t, err)
	var state struct {
		AppliedSeq int64 `json:"applied_seq"`
	}
	require.Eventually(t, func() bool {
		return getJSON(t, p.http+"/v1/sessions/over-nats", "test-dev-key", &state) == http.StatusOK && state.AppliedSeq == 1
	}, 30*time.Second, 50*time.Millisecond, "the turn published with the key is applied")
}

// TestNATSAuthCalloutConfig: MNEMOS_NATS_AUTH_CALLOUT takes an account's
// seed only, needs a port on the embedded server, and is masked.
func TestNATSAuthCalloutConfig(t *testing.T) {
	t.Parallel()
	account, err := nkeys.CreateAccount()
	require.NoError(t, err)
	accountSeed, err := account.Seed()
	require.NoError(t, err)
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	userSeed, err := user.Seed()
	require.NoError(t, err)

	cfg, err := configFromEnv("all", env(map[string]string{"MNEMOS_NATS_AUTH_CALLOUT": string(accountSeed), "MNEMOS_NATS_LISTEN": "127.0.0.1:4222"}))
	require.NoError(t, err)
	require.Equal(t, "$G", cfg.NATSAuthAccount)
	require.NotContains(t, cfg.LogValue().String(), string(accountSeed))
	_, err = configFromEnv("gateway", env(map[string]string{"MNEMOS_NATS_AUTH_CALLOUT": string(accountSeed), "MNEMOS_NATS_URL": "nats://n:4222"}))
	require.NoError(t, err, "a process on a server of its own answers too")

	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"MNEMOS_NATS_AUTH_CALLOUT": "SAnope", "MNEMOS_NATS_LISTEN": "127.0.0.1:4222"}, "not an nkey seed"},
		{map[string]string{"MNEMOS_NATS_AUTH_CALLOUT": string(userSeed), "MNEMOS_NATS_LISTEN": "127.0.0.1:4222"}, "account key"},
		{map[string]string{"MNEMOS_NATS_AUTH_CALLOUT": string(accountSeed)}, "MNEMOS_NATS_LISTEN"},
		{map[string]string{"MNEMOS_NATS_SYSTEM_URL": "nats://sys:s@n:4222", "MNEMOS_NATS_URL": "nats://n:4222"}, "set both"},
	} {
		_, err := configFromEnv("all", env(tc.vars))
		require.ErrorContains(t, err, tc.want, "%v", tc.vars)
	}
}
