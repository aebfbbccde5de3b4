package claudecode

import (
	"cmp"
	"slices"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Stop reasons the importer infers when the transcript recorded none.
const (
	StopToolUse = "tool_use"
	StopEndTurn = "end_turn"
)

// SidechainAgent is the agent id of sub-agent records that name no agentId.
const SidechainAgent = "sidechain"

// SessionOf returns the Mnemos session and agent of a record. Main-agent
// records belong to the transcript's sessionId, or to override when set;
// sub-agent (isSidechain) records to "<session>-agent-<agentId>".
func SessionOf(r *Record, override string) (session, agent string) {
	session = r.SessionID
	if override != "" {
		session = override
	}
	if !r.IsSidechain {
		return session, turn.MainAgent
	}
	agent = r.AgentID
	if agent == "" {
		agent = SidechainAgent
	}
	return session + "-agent-" + agent, agent
}

// GroupOptions changes how records map to sessions.
type GroupOptions struct {
	// Session, when set, replaces the transcript's sessionId (see SessionOf).
	Session string
}

// Round is one model API round of a session: the records added to the
// conversation since the previous response, then the response's records.
// A compaction boundary is a round of its own, with Boundary set and no response.
type Round struct {
	Session string
	// Agent is turn.MainAgent or the sub-agent's id.
	Agent string
	// Model is the response's model; empty for a round without response.
	Model string
	// Inputs are the user records (and assistant records that are not API
	// responses) added before the response, in file order. A user record
	// written between two records of a response belongs to the next round.
	Inputs []Record
	// Response holds the assistant records of one API response (one
	// message.id), in file order. Empty when the transcript ends before the
	// response, and for a boundary round.
	Response []Record
	// Usage is the usage of the response's last record: its input side is
	// final; its output may be a stale stream-start value.
	Usage *turn.Usage
	// Boundary is the compact_boundary record of a boundary round; Inputs then
	// hold the records left without a response before it.
	Boundary *Record
}

// ResponseID is the API message id of the response, or "".
func (r *Round) ResponseID() string {
	if len(r.Response) == 0 {
		return ""
	}
	return responseKey(&r.Response[0])
}

// HasResponse reports whether the round holds a response.
func (r *Round) HasResponse() bool { return len(r.Response) > 0 }

// ResponseMessage merges the response records into one assistant message:
// their blocks in file order, the first record's uuid, and the stop reason
// recorded on the last record that has one, else inferred: "tool_use" when
// the response holds a tool_use block, "end_turn" otherwise.
func (r *Round) ResponseMessage() turn.Message {
	if len(r.Response) == 0 {
		return turn.Message{}
	}
	n := 0
	for i := range r.Response {
		n += len(r.Response[i].Message.Content)
	}
	m := turn.Message{UUID: r.Response[0].UUID, Role: TypeAssistant, Content: make(turn.Content, 0, n)}
	for i := range r.Response {
		m.Content = append(m.Content, r.Response[i].Message.Content...)
		if sr := r.Response[i].StopReason; sr != "" {
			m.StopReason = sr
		}
	}
	if m.StopReason == "" {
		m.StopReason = StopEndTurn
		if m.ToolUseCount() > 0 {
			m.StopReason = StopToolUse
		}
	}
	return m
}

// First is the line of the round's first record.
func (r *Round) First() int {
	line := 0
	for _, recs := range [][]Record{r.Inputs, r.Response} {
		if len(recs) > 0 && (line == 0 || recs[0].Line < line) {
			line = recs[0].Line
		}
	}
	if r.Boundary != nil && (line == 0 || r.Boundary.Line < line) {
		line = r.Boundary.Line
	}
	return line
}

func responseKey(r *Record) string {
	if r.MessageID != "" {
		return r.MessageID
	}
	return r.UUID
}

// sessionState is the round being built for one session.
type sessionState struct {
	cur  *Round
	next []Record // records written after cur's response started
}

// Group sorts records into rounds per session. Rounds come in the order of
// their first record, so each session's rounds keep their order; the last
// round of a session may lack a response.
func Group(records []Record, opts GroupOptions) []Round {
	var (
		out    []Round
		states = map[string]*sessionState{}
	)
	flush := func(st *sessionState) {
		if st.cur != nil && (len(st.cur.Inputs) > 0 || st.cur.HasResponse() || st.cur.Boundary != nil) {
			out = append(out, *st.cur)
		}
		st.cur = nil
	}
	for i := range records {
		rec := records[i]
		session, agent := SessionOf(&rec, opts.Session)
		st := states[session]
		if st == nil {
			st = &sessionState{}
			states[session] = st
		}
		newRound := func() *Round { return &Round{Session: session, Agent: agent} }

		switch {
		case rec.IsBoundary():
			pending := st.next
			if st.cur != nil && !st.cur.HasResponse() {
				pending = append(st.cur.Inputs, st.next...)
				st.cur = nil
			}
			flush(st)
			b := newRound()
			b.Inputs = pending
			b.Boundary = &rec
			st.cur, st.next = b, nil
			flush(st)

		case rec.IsResponse():
			if st.cur != nil && st.cur.HasResponse() && st.cur.ResponseID() == responseKey(&rec) {
				st.cur.Response = append(st.cur.Response, rec)
				st.cur.Model = rec.Model
				st.cur.Usage = rec.Usage
				continue
			}
			if st.cur == nil || st.cur.HasResponse() {
				flush(st)
				st.cur = newRound()
				st.cur.Inputs, st.next = st.next, nil
			}
			st.cur.Response = append(st.cur.Response, rec)
			st.cur.Model = rec.Model
			st.cur.Usage = rec.Usage

		default: // user records, and assistant records that are no API response
			switch {
			case st.cur == nil:
				st.cur = newRound()
				st.cur.Inputs = append(st.cur.Inputs, rec)
			case st.cur.HasResponse():
				st.next = append(st.next, rec)
			default:
				st.cur.Inputs = append(st.cur.Inputs, rec)
			}
		}
	}
	for _, st := range states {
		flush(st)
		if len(st.next) > 0 {
			r := Round{Inputs: st.next}
			r.Session, r.Agent = SessionOf(&st.next[0], opts.Session)
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b Round) int { return cmp.Compare(a.First(), b.First()) })
	return out
}
