package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
)

func TestHandlerDecodesChecksAndAddresses(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	good := events.TurnAccounted{Schema: events.SchemaTurnAccounted, EventID: "e-1", TenantID: "acme", SessionID: "s-1", Seq: 3}
	encode := func(v any) []byte {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		return data
	}
	var got []events.TurnAccounted
	errHandler := errors.New("the handler's own error")
	h := events.Handler(b, func(_ context.Context, _ bus.Message, ev events.TurnAccounted) error {
		got = append(got, ev)
		return errHandler
	})
	deliver := func(subject string, data []byte) error {
		return h(context.Background(), bus.Message{Subject: subject, Data: data})
	}
	subject := b.Subject(bus.KindTurnAccounted, "acme", "s-1")

	err := deliver(subject, encode(good))
	require.ErrorIs(t, err, errHandler)
	require.False(t, bus.IsPermanent(err), "the handler's errors are its own to mark")
	require.Equal(t, []events.TurnAccounted{good}, got)

	badSchema := good
	badSchema.Schema = "mnemos.turn_accounted.v9"
	badSeq := good
	badSeq.Seq = 0
	for name, tc := range map[string]struct {
		subject string
		data    []byte
	}{
		"not json":          {subject, []byte("{")},
		"unknown schema":    {subject, encode(badSchema)},
		"no seq":            {subject, encode(badSeq)},
		"another tenant":    {b.Subject(bus.KindTurnAccounted, "other", "s-1"), encode(good)},
		"another session":   {b.Subject(bus.KindTurnAccounted, "acme", "s-2"), encode(good)},
		"another kind":      {b.Subject(bus.KindCompactRequested, "acme", "s-1"), encode(good)},
		"malformed subject": {"turn", encode(good)},
	} {
		err := deliver(tc.subject, tc.data)
		require.True(t, bus.IsPermanent(err), "%s: %v", name, err)
	}
	require.Len(t, got, 1, "the handler never saw a bad message")
}

func TestMsgIDsAreDerivedFromTheCause(t *testing.T) {
	t.Parallel()
	auto := events.CompactRequested{TenantID: "acme", SessionID: "s-1", Request: 2}
	manual := events.CompactRequested{TenantID: "acme", SessionID: "s-1", CompactionID: "c-9"}
	require.Equal(t, "compact:acme:s-1:2", auto.MsgID())
	require.Equal(t, "compact:manual:c-9", manual.MsgID())
	require.Equal(t, "threshold:e-1", events.ContextThreshold{EventID: "e-1"}.MsgID())
	require.Equal(t, "threshold:compaction:c-9", events.ContextThreshold{EventID: "e-1", CompactionID: "c-9"}.MsgID())
	d := events.Dream{TenantID: "acme", DreamID: "d-1", State: "completed"}
	require.Equal(t, "dream.completed", d.Kind())
	require.Equal(t, "dream:acme:d-1:completed", d.MsgID())
	d.Approved = true
	require.Equal(t, "dream:acme:d-1:completed:approved", d.MsgID(), "an approval completes the dream a second time")
}
