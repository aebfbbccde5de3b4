package claudecode

import (
	"maps"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// eventNamespace is the UUID v5 namespace of imported event ids.
var eventNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://mnemos.dev/schemas/mnemos.turn.v1.json#claudecode"))

// EventID is the deterministic id of an imported event: a UUID v5 of the
// tenant (may be empty), the session, the seq and the API response id, so
// replaying a transcript again sends the same ids and the service drops the
// repeats.
func EventID(tenant, session string, seq int64, responseID string) string {
	var b strings.Builder
	b.Grow(len(tenant) + len(session) + len(responseID) + 24)
	b.WriteString(tenant)
	b.WriteByte(0)
	b.WriteString(session)
	b.WriteByte(0)
	b.WriteString(strconv.FormatInt(seq, 10))
	b.WriteByte(0)
	b.WriteString(responseID)
	return uuid.NewSHA1(eventNamespace, []byte(b.String())).String()
}

// EventOptions fills the fields a transcript does not hold.
type EventOptions struct {
	// Tenant is written as tenant_id when set; over HTTP the API key names it.
	Tenant string
	// ContextWindow and MaxOutputTokens are written on every event when above 0.
	ContextWindow   int64
	MaxOutputTokens int64
	// MemoryScope is written on every event when set.
	MemoryScope map[string]string
}

// Events turns rounds (as Group returns them) into turn events, seq 1..n per
// session. A round without response is no event: at the end of a transcript
// it is dropped; before a compaction boundary its records, and the boundary
// round's, open the input of the session's next event, so no message is lost.
// That event says the client compacted (client_compaction, schema v1.1):
// its inputs open the new context.
func Events(rounds []Round, opts EventOptions) []turn.Event {
	var (
		out       []turn.Event
		seqs      = map[string]int64{}
		carried   = map[string][]turn.Message{}
		compacted = map[string]*turn.ClientCompaction{}
	)
	for i := range rounds {
		r := &rounds[i]
		if !r.HasResponse() {
			if r.Boundary != nil {
				for _, rec := range r.Inputs {
					carried[r.Session] = append(carried[r.Session], rec.Message)
				}
				cc := &turn.ClientCompaction{}
				if m := r.Boundary.Compact; m != nil {
					if m.Trigger == "manual" || m.Trigger == "auto" {
						cc.Trigger = m.Trigger
					}
					cc.PreTokens = max(m.PreTokens, 0)
				}
				compacted[r.Session] = cc
			}
			continue
		}
		seqs[r.Session]++
		seq := seqs[r.Session]

		inputs := make([]turn.Message, 0, len(carried[r.Session])+len(r.Inputs))
		inputs = append(inputs, carried[r.Session]...)
		delete(carried, r.Session)
		for _, rec := range r.Inputs {
			inputs = append(inputs, rec.Message)
		}
		resp := r.ResponseMessage()
		last := &r.Response[len(r.Response)-1]
		ev := turn.Event{
			Schema:          turn.SchemaV1,
			EventID:         EventID(opts.Tenant, r.Session, seq, r.ResponseID()),
			TenantID:        opts.Tenant,
			SessionID:       r.Session,
			Seq:             seq,
			AgentID:         r.Agent,
			Model:           r.Model,
			ContextWindow:   max(opts.ContextWindow, 0),
			MaxOutputTokens: max(opts.MaxOutputTokens, 0),
			InputMessages:   inputs,
			Response:        &resp,
			OccurredAt:      last.Timestamp.UTC(),
		}
		if opts.MemoryScope != nil {
			ev.MemoryScope = maps.Clone(opts.MemoryScope)
		}
		if r.Usage != nil {
			u := *r.Usage
			ev.Usage = &u
		}
		if cc := compacted[r.Session]; cc != nil {
			ev.Schema, ev.ClientCompaction = turn.SchemaV1_1, cc
			delete(compacted, r.Session)
		}
		out = append(out, ev)
	}
	return out
}
