package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// A client sends its whole conversation with every request, and under one
// session id it sends several conversations: the main agent's, its
// subagents' (Claude Code's Agent tool sends the main session's id), side
// calls, rewinds and its own compactions. The proxy tells them apart by
// content, never by count: every message has a digest of its canonical
// form (canonDigest), chained over the messages before it, the session id
// and the door (chainOf), so one digest names a whole conversation prefix.
// A request is placed (place) by the longest prefix of its own that a
// thread of the session holds; each thread is a Mnemos session of its own
// (migrations/00033_proxy_threads.sql), so what Mnemos renders for a
// request is only ever its own thread's conversation.

// The outcomes of placing a request, beside proxyManaged (the request
// continues its thread), as counted by mnemos.proxy.requests{outcome}.
const (
	proxyNewAgent        = "new_agent"        // a conversation no thread holds: another agent's thread
	proxyBranched        = "branched"         // shares only a prefix with a thread: a branch from the fork
	proxyClientCompacted = "client_compacted" // the client's own summary in place of its history
	proxyRetry           = "retry"            // repeats or races a request its thread answered: not recorded
	// proxyClientCompaction is the client's own summarization call (the
	// Codex CLI's): managed, not a round of its conversation.
	proxyClientCompaction = "client_compaction"
)

// errMovedOn reports a thread that grew while a request was placed on it
// (a request of the same conversation sent at once): the request goes up
// as the client sent it and is not recorded.
var errMovedOn = errors.New("the thread moved on while the request was placed")

// clientSummaryPrefix starts the first message of a conversation that
// Claude Code compacted itself (/compact, or its auto-compaction).
const clientSummaryPrefix = "This session is being continued from a previous conversation"

// codexSummaryPrefix starts the summary the Codex CLI goes on from after
// it compacted itself: a user item after its environment and its task,
// which fold into its first message.
const codexSummaryPrefix = "Another language model started to solve this problem"

// canonDigest is the SHA-256 of a message's canonical form: its role and
// content as Mnemos encodes them (turn.Marshal, a fixed order of fields),
// every cache_control dropped (decodeMessage did), and the JSON values a
// block carries as sent (a tool's input, citations, a source, a block of
// a type Mnemos does not know) with their objects' keys in order. The
// client moves its cache breakpoints from request to request, and
// Postgres or an upstream's stream may give a tool's input back with its
// keys in another order: neither changes the conversation.
func canonDigest(m turn.Message) (digest, error) {
	content, err := canonContent(m.Content)
	if err != nil {
		return digest{}, err
	}
	raw, err := turn.Marshal(assembly.Wire{Role: m.Role, Content: content})
	if err != nil {
		return digest{}, err
	}
	return sha256.Sum256(raw), nil
}

// canonContent is c with the JSON values its blocks carry as sent made
// canonical (canonicalJSON), in tool results' content too.
func canonContent(c turn.Content) (turn.Content, error) {
	out := make(turn.Content, len(c))
	for i, b := range c {
		for _, v := range []*json.RawMessage{&b.Input, &b.Citations, &b.Source, &b.Raw} {
			if len(*v) == 0 {
				continue
			}
			canon, err := canonicalJSON(*v)
			if err != nil {
				return nil, err
			}
			*v = canon
		}
		if b.Content != nil {
			inner, err := canonContent(*b.Content)
			if err != nil {
				return nil, err
			}
			b.Content = &inner
		}
		out[i] = b
	}
	return out, nil
}

// chainSeed is where a session's chains of a door start: digests of two
// sessions' conversations never meet, even when they hold the same
// messages, and neither do those of two doors, whose threads are rendered
// for different APIs (the Messages API's seed is the one chains had before
// there were other doors).
func chainSeed(tenant, session string, d *door) digest {
	seed := "mnemos.thread\x00" + tenant + "\x00" + session
	if d != nil && d != messagesDoor {
		seed += "\x00" + d.name
	}
	return sha256.Sum256([]byte(seed))
}

// chainNext is the chained digest of a message (by its canonDigest) after
// the prefix whose chained digest is prev.
func chainNext(prev, canon digest) digest {
	var buf [2 * len(digest{})]byte
	copy(buf[:len(prev)], prev[:])
	copy(buf[len(prev):], canon[:])
	return sha256.Sum256(buf[:])
}

// chainOf is the chained digest of every prefix of a conversation of a
// door whose messages' canonDigests are canons.
func chainOf(tenant, session string, d *door, canons []digest) []digest {
	out := make([]digest, len(canons))
	prev := chainSeed(tenant, session, d)
	for i, c := range canons {
		prev = chainNext(prev, c)
		out[i] = prev
	}
	return out
}

// shape is what placing a request looks at besides its chain.
type shape struct {
	tools      bool // it offers tools
	claudeCode bool // Claude Code sent it (its session header)
	summary    bool // its first message is the client's own summary
}

// shapeOf reads a request's shape.
func shapeOf(req *messagesRequest) shape {
	var s shape
	if raw := bytes.TrimSpace(req.fields["tools"]); len(raw) > 2 && raw[0] == '[' {
		var tools []json.RawMessage
		s.tools = json.Unmarshal(raw, &tools) == nil && len(tools) > 0
	}
	if req.client != nil {
		s.claudeCode = req.client.Header.Get(httpapi.HeaderClaudeCodeSession) != ""
	}
	if len(req.messages) > 0 {
		if m, err := req.turnAt(0); err == nil && m.Role == "user" {
			for _, b := range m.Content {
				text := strings.TrimSpace(b.Text)
				if b.Type == turn.BlockText && (strings.HasPrefix(text, clientSummaryPrefix) || strings.HasPrefix(text, codexSummaryPrefix)) {
					s.summary = true
				}
			}
		}
	}
	return s
}

// placement is where a request goes: the thread it is rendered from and
// recorded to.
type placement struct {
	thread store.Thread
	// held is how many of the request's messages the thread holds (its
	// length when placed): a round recorded on it adds the rest. A thread
	// that grew since does not take the round (errMovedOn).
	held int64
	// matched is the last position of the request's prefix the thread
	// holds; -1 for a new thread.
	matched int64
	// fresh marks a thread no round was recorded to yet: nothing stored
	// to render, the request goes up as sent.
	fresh   bool
	outcome string
	// record says whether the round is recorded (not for a retry).
	record bool
}

// place decides a request's thread, from the session's threads, the
// longest prefix of the request that one of them holds (match, nil when
// none holds its first message), the request's chain and its shape. It
// reads nothing: a function of what it is given.
//
//   - A request whose prefix ends where its thread ends continues it.
//   - A request that is a thread's earlier request again, to the message,
//     repeats it (a client's retry): placed on the thread, not recorded.
//   - A request that shares only a prefix with a thread branches from the
//     fork point: a thread of its own, of the same agent, holding the
//     whole conversation the client sent.
//   - A request that shares no first message with any thread starts one:
//     the client's own summary (client_compacted, the main agent's); the
//     session's main agent when it has none yet (for Claude Code, whose
//     side calls offer no tools, the first that offers tools); another
//     agent otherwise (side, when it offers no tools).
func place(session string, threads []store.Thread, match *store.PathMatch, chain []digest, sh shape) placement {
	n := int64(len(chain))
	if match != nil {
		for _, t := range threads {
			if t.ThreadID != match.ThreadID {
				continue
			}
			p := match.Position
			switch {
			case p >= t.Length-1:
				return placement{thread: t, held: t.Length, matched: p, outcome: proxyManaged, record: true}
			case p == n-1 && p == t.Length-2:
				return placement{thread: t, held: t.Length, matched: p, outcome: proxyRetry}
			}
			fork := min(p+1, n-1)
			b := store.Thread{
				SessionID: session, ThreadID: threadID(session, "b"+short(chain[fork])), AgentID: t.AgentID,
				Kind: store.ThreadBranch, Parent: t.ThreadID, ForkPosition: p,
			}
			return placement{thread: b, matched: -1, fresh: true, outcome: proxyBranched, record: true}
		}
	}
	if n == 0 {
		return placement{matched: -1, fresh: true, outcome: proxyPassthrough} // no conversation: the upstream judges it
	}
	hasMain := false
	for _, t := range threads {
		hasMain = hasMain || t.AgentID == turn.MainAgent
	}
	t := store.Thread{SessionID: session, ForkPosition: -1}
	outcome := proxyNewAgent
	switch {
	case sh.summary && hasMain:
		t.ThreadID, t.AgentID, t.Kind = threadID(session, "c"+short(chain[0])), turn.MainAgent, store.ThreadClientCompacted
		outcome = proxyClientCompacted
	case !hasMain && (sh.tools || !sh.claudeCode):
		t.ThreadID, t.AgentID, t.Kind = session, turn.MainAgent, store.ThreadMain
		outcome = proxyManaged
	case sh.tools:
		t.AgentID, t.Kind = "agent-"+short(chain[0]), store.ThreadAgent
		t.ThreadID = threadID(session, t.AgentID)
	default:
		t.AgentID, t.Kind = "side-"+short(chain[0]), store.ThreadSide
		t.ThreadID = threadID(session, t.AgentID)
	}
	return placement{thread: t, matched: -1, fresh: true, outcome: outcome, record: true}
}

// short is the first 12 hex digits of a digest: enough to tell a
// session's threads apart.
func short(d digest) string { return hex.EncodeToString(d[:6]) }

// threadID is the Mnemos session id of a thread of session other than its
// first main thread: the session's id and the thread's suffix, or, when
// that would be longer than an id may be, a digest of the session's id in
// its place.
func threadID(session, suffix string) string {
	if id := session + "--" + suffix; len(id) <= turn.MaxIDLen {
		return id
	}
	d := sha256.Sum256([]byte(session))
	return "t" + hex.EncodeToString(d[:16]) + "--" + suffix
}

// placeRequest places a request of a session (place) on what the store
// holds, and leaves the placement in req.place. checkMessages must have
// run. A request that continues the thread its conversation's last round
// was recorded to, as this process recorded it (h.tips), is placed without
// a read: a thread's path only grows, so the messages up to that round are
// the thread's still; the render (clientTail) and the record
// (lockedThread.follows) check the rest against the store.
func (h *Handler) placeRequest(ctx context.Context, tenant string, req *messagesRequest) (*placement, error) {
	if req.place != nil {
		return req.place, nil
	}
	req.chain = chainOf(tenant, req.session, req.door, req.canons)
	if len(req.chain) > 0 && !req.replaced {
		if tip, ok := h.tips.get(req.chain[0]); ok && int64(len(req.chain)) > tip.length && req.chain[tip.length-1] == tip.last {
			req.place = &placement{thread: tip.thread, held: tip.length, matched: tip.length - 1, outcome: proxyManaged, record: true}
			return req.place, nil
		}
	}
	digests := make([][]byte, len(req.chain))
	for i := range req.chain {
		digests[i] = req.chain[i][:]
	}
	threads, match, err := h.store.ThreadsAndMatch(ctx, tenant, req.session, digests)
	if err != nil {
		return nil, err
	}
	pl := place(req.session, threads, match, req.chain, shapeOf(req))
	req.place = &pl
	return req.place, nil
}

// threadTip is where a conversation's last recorded round left its
// thread: how many messages the thread holds, and the chained digest of
// the last.
type threadTip struct {
	thread store.Thread
	length int64
	last   digest
}

// tipsLimit is how many conversations' tips a generation of h.tips keeps.
const tipsLimit = 1 << 14
