package store

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the tracer of this package.
const tracerName = "github.com/mnemos-ai/mnemos/pkg/store"

// maxQueryText bounds the statement text recorded on a span. Statements are
// parameterized: the text holds no values.
const maxQueryText = 2048

// NewTracer returns a pgx tracer (for Config.Tracer) that makes a client span
// of every query and every pipelined batch, named after its sqlc query
// ("SessionLock") or else its first keyword ("BEGIN"). Only queries made
// inside a recorded span are traced: a poll with no trace of its own (the
// outbox relay's, say) would otherwise start a new trace every second, and
// a trace that is not sampled costs no spans.
func NewTracer(tp trace.TracerProvider) pgx.QueryTracer {
	return &queryTracer{tracer: tp.Tracer(tracerName)}
}

type queryTracer struct {
	tracer trace.Tracer
}

var (
	_ pgx.QueryTracer = (*queryTracer)(nil)
	_ pgx.BatchTracer = (*queryTracer)(nil)
)

// start begins a client span when ctx is inside a recorded span.
func (q *queryTracer) start(ctx context.Context, conn *pgx.Conn, name string, attrs ...attribute.KeyValue) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	attrs = append(attrs, semconv.DBSystemNamePostgreSQL)
	if conn != nil {
		cfg := conn.Config()
		attrs = append(attrs, semconv.DBNamespace(cfg.Database), semconv.ServerAddress(cfg.Host), semconv.ServerPort(int(cfg.Port)))
	}
	ctx, _ = q.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// end ends the span start began, if it did.
func end(ctx context.Context, tag pgconn.CommandTag, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if err != nil {
		recordError(span, err)
	} else {
		span.SetAttributes(semconv.DBResponseReturnedRows(int(tag.RowsAffected())))
	}
	span.End()
}

func recordError(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		span.SetAttributes(semconv.DBResponseStatusCode(pgErr.Code), semconv.ErrorTypeKey.String(pgErr.Code))
		return
	}
	span.SetAttributes(semconv.ErrorTypeOther)
}

// TraceQueryStart implements pgx.QueryTracer.
func (q *queryTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx // before describing the statement
	}
	name, op := describe(data.SQL)
	return q.start(ctx, conn, name, semconv.DBQuerySummary(name), semconv.DBOperationName(op), semconv.DBQueryText(truncate(data.SQL)))
}

// TraceQueryEnd implements pgx.QueryTracer.
func (q *queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.CommandTag, data.Err)
}

// TraceBatchStart implements pgx.BatchTracer: one span for the batch.
func (q *queryTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	n := 0
	if data.Batch != nil {
		n = data.Batch.Len()
	}
	return q.start(ctx, conn, "batch", semconv.DBOperationName("BATCH"), semconv.DBOperationBatchSize(n))
}

// TraceBatchQuery implements pgx.BatchTracer: each query of the batch is an
// event on its span.
func (q *queryTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	name, _ := describe(data.SQL)
	attrs := []attribute.KeyValue{semconv.DBQuerySummary(name), semconv.DBResponseReturnedRows(int(data.CommandTag.RowsAffected()))}
	if data.Err != nil {
		attrs = append(attrs, attribute.String("exception.message", data.Err.Error()))
	}
	span.AddEvent("query", trace.WithAttributes(attrs...))
}

// TraceBatchEnd implements pgx.BatchTracer.
func (q *queryTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(ctx, pgconn.CommandTag{}, data.Err)
}

// describe names a statement: sqlc's "-- name: SessionLock :one" comment,
// else its first keyword; and its operation (the first keyword).
func describe(sql string) (name, op string) {
	rest := strings.TrimSpace(sql)
	if after, ok := strings.CutPrefix(rest, "-- name: "); ok {
		line, body, _ := strings.Cut(after, "\n")
		name, _, _ = strings.Cut(line, " ")
		rest = strings.TrimSpace(body)
	}
	// sqlc may leave the query's own comment lines before the statement.
	for strings.HasPrefix(rest, "--") {
		_, rest, _ = strings.Cut(rest, "\n")
		rest = strings.TrimSpace(rest)
	}
	op, _, _ = strings.Cut(rest, " ")
	op = strings.ToUpper(strings.TrimRight(op, ";\n"))
	if name == "" {
		name = op
	}
	return name, op
}

func truncate(s string) string {
	if len(s) <= maxQueryText {
		return s
	}
	cut := maxQueryText
	for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
