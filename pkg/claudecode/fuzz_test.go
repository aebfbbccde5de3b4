package claudecode_test

import (
	"bytes"
	"testing"

	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// FuzzParse: the importer reads any input without panicking; what it parses
// groups into rounds that hold every record exactly once, and turns into
// events numbered 1..n per session with distinct ids, each of which Decode
// either accepts or refuses with a reason (replay then stops and says which).
// The seed corpus is in testdata/fuzz/FuzzParse: small synthetic inputs.
// The sample transcripts (testdata/claude-code, 160 KB to 2 MB each) are
// not seeds: they slow every mutation, and the unit tests cover them.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"hi"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := claudecode.Parse(bytes.NewReader(data))
		if err != nil {
			return
		}
		rounds := claudecode.Group(recs, claudecode.GroupOptions{})
		held := 0
		for _, r := range rounds {
			held += len(r.Inputs) + len(r.Response)
			if r.Boundary != nil {
				held++
			}
		}
		if held != len(recs) {
			t.Fatalf("%d records parsed, %d in rounds", len(recs), held)
		}

		evs := claudecode.Events(rounds, claudecode.EventOptions{Tenant: "acme"})
		next := map[string]int64{}
		ids := map[string]bool{}
		for _, ev := range evs {
			next[ev.SessionID]++
			if ev.Seq != next[ev.SessionID] {
				t.Fatalf("session %q: seq %d where %d was due", ev.SessionID, ev.Seq, next[ev.SessionID])
			}
			if ids[ev.EventID] {
				t.Fatalf("event id %s twice", ev.EventID)
			}
			ids[ev.EventID] = true
			if ev.Response == nil {
				t.Fatalf("event %s has no response", ev.EventID)
			}
			enc, err := turn.Marshal(ev)
			if err != nil {
				t.Fatalf("event %s does not encode: %v", ev.EventID, err)
			}
			if _, err := turn.Decode(enc, turn.DecodeOptions{Tenant: "acme"}); err != nil {
				if _, ok := turn.AsInputError(err); !ok {
					t.Fatalf("event %s refused without a reason: %v", ev.EventID, err)
				}
			}
		}
	})
}
