package isolation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/natsembed"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// publisher is a tenant's backend connected to NATS with that tenant's user.
type publisher struct {
	js jetstream.JetStream
	nc *nats.Conn
	bustest.Refusals
}

func connectAs(t *testing.T, serverURL, user string) *publisher {
	t.Helper()
	p := &publisher{}
	nc, err := nats.Connect(serverURL, nats.UserInfo(user, user+"-secret"), nats.CustomInboxPrefix("_INBOX_"+user),
		nats.ErrorHandler(p.Handler))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	p.nc = nc
	p.js, err = jetstream.New(nc)
	require.NoError(t, err)
	return p
}

func turnEvent(t *testing.T, tenant, session string, seq int64) []byte {
	t.Helper()
	data, err := json.Marshal(turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", session, seq), TenantID: tenant, SessionID: session, Seq: seq,
		OccurredAt:    time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		InputMessages: []turn.Message{{UUID: fmt.Sprintf("u%d", seq), Role: "user", Content: turn.Content{{Type: "text", Text: "hello"}}}},
		Response:      &turn.Message{UUID: fmt.Sprintf("a%d", seq), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: "text", Text: "hi"}}},
		Usage:         &turn.Usage{InputTokens: 10, OutputTokens: 5},
	})
	require.NoError(t, err)
	return data
}

// TestTenantCredentialsKeepPublishersToTheirSubjects runs NATS with the
// users of testdata/nats-tenants.conf (the configuration README shows): the
// services' user, and one user per tenant allowed to publish only on
// turn.completed.<its tenant>.>. The server refuses acme's user on globex's
// subject, and refuses it every subscription but its own inbox and every
// JetStream request (stream info, message get, consumers), so it can read
// no tenant's turns. An event
// published on a tenant's own subject that names another tenant in its body
// is refused by the accountant (tenant_mismatch), counted, and changes no
// tenant's rows. An event that matches is applied as usual.
func TestTenantCredentialsKeepPublishersToTheirSubjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, err := natsembed.Start(natsembed.Options{Listen: true, ConfigFile: "testdata/nats-tenants.conf"})
	require.NoError(t, err)
	t.Cleanup(ns.Shutdown)

	// The services connect as their own user.
	u, err := url.Parse(ns.ClientURL())
	require.NoError(t, err)
	u.User = url.UserPassword("mnemos", "mnemos-secret")
	b, err := bus.Connect(ctx, bus.Config{URL: u.String(), Name: "mnemos-test", Logger: bustest.Logger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	require.NoError(t, b.EnsureStreams(ctx))
	st := pgtest.New(t)
	for _, tenant := range []string{"acme", "globex"} {
		require.NoError(t, st.EnsureTenant(ctx, tenant, tenant))
	}
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	metrics := telemetrytest.New(t)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, b, settings, bustest.Logger(t), metrics.Meter())
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = acc.Run(runCtx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	acme := connectAs(t, ns.ClientURL(), "acme")
	globex := connectAs(t, ns.ClientURL(), "globex")

	// Acme publishes its own turn: stored and applied.
	_, err = acme.js.Publish(ctx, "turn.completed.acme.s1", turnEvent(t, "acme", "s1", 1), jetstream.WithMsgID("acme:s1-1"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := st.GetSession(ctx, "acme", "s1")
		return err == nil && s.AppliedSeq == 1
	}, 30*time.Second, 20*time.Millisecond)

	// Acme's user on globex's subject: the server refuses the publish.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	_, err = acme.js.Publish(pctx, "turn.completed.globex.s1", turnEvent(t, "globex", "s1", 1), jetstream.WithMsgID("globex:s1-1"))
	require.Error(t, err, "no ack for a refused publish")
	require.Eventually(t, func() bool { return acme.Refused("turn.completed.globex.s1") }, 10*time.Second, 20*time.Millisecond,
		"the server reports a permissions violation for globex's subject")
	stream, err := b.JetStream().Stream(ctx, b.StreamName(bus.StreamTurns))
	require.NoError(t, err)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter("turn.completed.globex.>"))
	require.NoError(t, err)
	require.Empty(t, info.State.Subjects, "nothing was stored on globex's subjects")

	// Nor may acme's user read globex's turns: not by a core subscription,
	// to every tenant's subjects or to globex's alone, ...
	for _, subject := range []string{"turn.completed.>", "turn.completed.globex.>", "turn.accounted.globex.>", ">"} {
		sub, err := acme.nc.SubscribeSync(subject)
		require.NoError(t, err) // the server answers asynchronously
		require.NoError(t, acme.nc.Flush())
		require.Eventually(t, func() bool { return acme.Refused(subject) }, 10*time.Second, 20*time.Millisecond,
			"the server refuses acme's subscription to %s", subject)
		_, err = sub.NextMsg(200 * time.Millisecond)
		require.Error(t, err, "nothing reached acme on %s", subject)
	}
	// ... nor through JetStream, where globex's turn is stored: stream
	// info, a direct message get and a consumer of its own (pull or push,
	// delivering to acme's inbox) are all JetStream API requests the
	// server refuses acme's user to make.
	_, err = globex.js.Publish(ctx, "turn.completed.globex.s9", turnEvent(t, "globex", "s9", 1), jetstream.WithMsgID("globex:s9-1"))
	require.NoError(t, err)
	turns := b.StreamName(bus.StreamTurns)
	jsReads := map[string]func(context.Context) error{
		"$JS.API.STREAM.INFO." + turns: func(ctx context.Context) error {
			_, err := acme.js.Stream(ctx, turns)
			return err
		},
		"$JS.API.STREAM.MSG.GET." + turns: func(ctx context.Context) error {
			_, err := acme.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+turns, []byte(`{"last_by_subj":"turn.completed.globex.s9"}`))
			return err
		},
		"$JS.API.CONSUMER.CREATE." + turns: func(ctx context.Context) error {
			_, err := acme.js.CreateOrUpdateConsumer(ctx, turns, jetstream.ConsumerConfig{FilterSubject: "turn.completed.globex.>"})
			return err
		},
		"$JS.API.CONSUMER.CREATE." + turns + ".spy": func(ctx context.Context) error {
			req := `{"stream_name":"` + turns + `","config":{"name":"spy","deliver_subject":"_INBOX_acme.spy","filter_subject":"turn.completed.globex.>","deliver_policy":"all","ack_policy":"none"}}`
			_, err := acme.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.CREATE."+turns+".spy.turn.completed.globex.>", []byte(req))
			return err
		},
	}
	for subject, read := range jsReads {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		err := read(rctx)
		rcancel()
		require.Error(t, err, "no answer to acme's %s", subject)
		require.Eventually(t, func() bool { return acme.Refused(subject) }, 10*time.Second, 20*time.Millisecond,
			"the server refuses acme's %s", subject)
	}
	consumers := stream.ListConsumers(ctx)
	for c := range consumers.Info() {
		require.NotEqual(t, "spy", c.Name, "acme created no consumer")
		require.NotContains(t, c.Config.FilterSubject, "globex", "acme created no consumer of globex's turns")
	}
	require.NoError(t, consumers.Err())

	// Globex's user, on its own subject, with a body naming acme: the
	// server lets it through, the accountant refuses and counts it.
	_, err = globex.js.Publish(ctx, "turn.completed.globex.s2", turnEvent(t, "acme", "s2", 1), jetstream.WithMsgID("globex:s2-1"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return metrics.Sum("mnemos.turns.rejected", "reason", string(turn.ReasonTenantMismatch)) == 1
	}, 30*time.Second, 20*time.Millisecond, "the accountant refused the event and counted it")
	for _, tenant := range []string{"acme", "globex"} {
		_, err := st.GetSession(ctx, tenant, "s2")
		require.ErrorIs(t, err, store.ErrNotFound, "the refused event left no session for %s", tenant)
	}
	s, err := st.GetSession(ctx, "acme", "s1")
	require.NoError(t, err)
	require.EqualValues(t, 2, s.MessageCount, "acme's session holds its own turn only")
}
