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

	"github.com/mnemos-ai/mnemos/pkg/pgtest"
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
		s, err := tx.LockSession(tctx, "s1", "main")
		if err != nil {
			return err
		}
		s.TokenCount = 7
		return tx.Pipeline(tctx, func(p *store.Tx) error { return p.SaveSession(tctx, s) })
	}))
	_ = st.InTx(tctx, "acme", func(tx *store.Tx) error {
		var n int
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
		byName[s.Name()] = s
		require.Equal(t, root.SpanContext().SpanID(), s.Parent().SpanID(), s.Name())
		require.Equal(t, trace.SpanKindClient, s.SpanKind())
		require.Contains(t, s.Attributes(), attribute.String("db.system.name", "postgresql"))
	}
	require.Equal(t, []string{"BEGIN", "SessionLock", "batch", "COMMIT", "BEGIN", "SELEC", "ROLLBACK"}, names)
	lock := byName["SessionLock"]
	require.Contains(t, lock.Attributes(), attribute.String("db.operation.name", "INSERT"))
	require.Contains(t, lock.Attributes(), attribute.Int("db.response.returned_rows", 1))
	batch := byName["batch"]
	require.Len(t, batch.Events(), 1)
	require.Contains(t, batch.Events()[0].Attributes, attribute.String("db.query.summary", "SessionUpdateAccounting"))
	bad := byName["SELEC"]
	require.Equal(t, codes.Error, bad.Status().Code)
	require.Contains(t, bad.Attributes(), attribute.String("db.response.status_code", "42601"), "a syntax error's SQLSTATE")
}
