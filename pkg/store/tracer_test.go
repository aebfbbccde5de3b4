package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

func TestTracerMakesASpanOfEveryQueryInATrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	st, err := store.Open(ctx, store.Config{URL: pgtest.URL(t), MaxConns: 2, Tracer: store.NewTracer(tp)})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.Empty(t, rec.Ended(), "a query outside any trace starts none")

	tctx, root := tp.Tracer("test").Start(ctx, "handle")
	require.NoError(t, st.InTx(tctx, "acme", func(tx *store.Tx) error {
		if _, err := tx.LockSession(tctx, "s1", "main"); err != nil { // sent with BEGIN
			return err
		}
		s, err := tx.Session(tctx, "s1") // alone
		if err != nil {
			return err
		}
		s.TokenCount = 7
		return tx.Pipeline(tctx, func(p *store.Tx) error { return p.SaveSessions(tctx, s) })
	}))
	_ = st.InTx(tctx, "acme", func(tx *store.Tx) error {
		var n int
		if err := tx.QueryRowForTest(tctx, "SELECT 1").Scan(&n); err != nil {
			return err
		}
		return tx.QueryRowForTest(tctx, "SELEC 1").Scan(&n)
	})
	root.End()

	var names []string
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.Name() == "handle" {
			continue
		}
		names = append(names, s.Name())
		if byName[s.Name()] == nil {
			byName[s.Name()] = s
		}
		require.Equal(t, root.SpanContext().SpanID(), s.Parent().SpanID(), s.Name())
		require.Equal(t, trace.SpanKindClient, s.SpanKind())
		require.Contains(t, s.Attributes(), attribute.String("db.system.name", "postgresql"))
	}
	require.Equal(t, []string{"batch", "SessionGet", "batch", "COMMIT", "batch", "SELEC", "ROLLBACK"}, names)
	first := byName["batch"]
	var sent []string
	for _, ev := range first.Events() {
		for _, a := range ev.Attributes {
			if a.Key == "db.query.summary" {
				sent = append(sent, a.Value.AsString())
			}
		}
	}
	require.Equal(t, []string{"BEGIN", "SELECT", "SessionLock"}, sent, "the first batch: BEGIN, the tenant, the first statement")
	require.Contains(t, first.Events()[2].Attributes, attribute.Int("db.response.returned_rows", 1))
	get := byName["SessionGet"]
	require.Contains(t, get.Attributes(), attribute.String("db.operation.name", "SELECT"))
	require.Contains(t, get.Attributes(), attribute.Int("db.response.returned_rows", 1))
	bad := byName["SELEC"]
	require.Equal(t, codes.Error, bad.Status().Code)
	require.Contains(t, bad.Attributes(), attribute.String("db.response.status_code", "42601"), "a syntax error's SQLSTATE")
}
