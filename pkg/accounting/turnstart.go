package accounting

import (
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Request is what a round's request says beyond its new messages: its model,
// its system prompt and tools, whether the client compacted before it. The
// accountant reads it from a turn event, the gateway's preflight from its body.
type Request struct {
	Model            string
	Prefix           *turn.RequestPrefix
	ClientCompaction bool
}

// RequestOf is the request of a turn event.
func RequestOf(ev turn.Event) Request {
	return Request{Model: ev.Model, Prefix: ev.RequestPrefix, ClientCompaction: ev.ClientCompaction != nil}
}

// ModelChanged reports whether req names a model other than the one the
// session's usage was measured with; the caller then estimates the context
// for Start.
func (req Request) ModelChanged(s sessionstate.Session) bool {
	return req.Model != "" && s.Model != "" && req.Model != s.Model && !req.ClientCompaction
}

// PrefixOf resolves a request's prefix against the session: its estimate
// and hash, and false when it names none or only a hash the session does
// not hold (the session's own then stays). An error is a system or tools
// of the wrong shape.
func PrefixOf(s sessionstate.Session, p *turn.RequestPrefix) (int64, string, bool, error) {
	if p == nil {
		return 0, "", false, nil
	}
	n, ok, err := tokens.EstimatePrefix(*p)
	if err != nil {
		return 0, "", false, err
	}
	if ok {
		return n, p.Hash, true, nil
	}
	if p.Hash != "" && p.Hash == s.PrefixHash {
		return s.PrefixTokens, p.Hash, true, nil
	}
	return 0, "", false, nil
}

// Start changes a session's tally for a request before its new messages are
// counted: a client compaction starts the count over (the new context is the
// messages that follow, as after a compaction boundary); a model change
// counts the context by its estimate (contextEstimate, read by the caller
// when ModelChanged) until the new model reports; a prefix is taken. The
// session's prefix fields follow; s.StaleUsageAbove is cleared by a client
// compaction (Mnemos's own is then superseded).
func Start(t *tokens.Tally, s *sessionstate.Session, req Request, contextEstimate int64) error {
	switch {
	case req.ClientCompaction:
		t.Reset()
		s.StaleUsageAbove = 0
	case req.ModelChanged(*s):
		t.Restart(contextEstimate)
	}
	n, hash, ok, err := PrefixOf(*s, req.Prefix)
	if err != nil {
		return err
	}
	if ok {
		t.SetPrefix(n)
		s.PrefixTokens, s.PrefixHash = n, hash
	}
	return nil
}

// Save writes a tally back to its session.
func Save(s *sessionstate.Session, t tokens.Tally) {
	s.BaselineTokens, s.HasUsage, s.PendingTokens, s.PendingDense = t.Baseline, t.HasUsage, t.Pending, t.PendingDense
	s.EstimateFactor, s.DenseFactor, s.PrefixTokens = t.Factor, t.DenseFactor, t.Prefix
}
