package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
	"github.com/mnemos-ai/mnemos/pkg/openaiwire"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// A door is an API the proxy serves: Anthropic's Messages API, or one of
// OpenAI's, the Responses API and Chat Completions. Behind every door a
// request is the same thing to Mnemos — a conversation of turn messages,
// placed on a thread, rendered as the session's context stands and
// recorded as a round — and the door says how the conversation is read
// from the request and written back into it, where the request goes up,
// how its answer is read, and how errors look.
type door struct {
	name     string // as in logs: "messages", "responses", "chat"
	dialect  httpapi.Dialect
	provider store.Provider
	path     string // the upstream's
	// field is the request's field that holds the conversation, an
	// array of elements ("messages" or "items").
	field, elements string
}

var (
	messagesDoor  = &door{name: "messages", dialect: httpapi.Anthropic, provider: store.ProviderAnthropic, path: "/v1/messages", field: "messages", elements: "messages"}
	responsesDoor = &door{name: "responses", dialect: httpapi.OpenAI, provider: store.ProviderOpenAI, path: "/v1/responses", field: "input", elements: "items"}
	chatDoor      = &door{name: "chat", dialect: httpapi.OpenAI, provider: store.ProviderOpenAI, path: "/v1/chat/completions", field: "messages", elements: "messages"}
)

// openai reports whether the door is one of OpenAI's (a request read
// without a door is the Messages API's).
func (d *door) openai() bool { return d != nil && d.provider == store.ProviderOpenAI }

// openaiInput is what an OpenAI request holds besides its messages: the
// system and developer items its input opens with (the instructions, as
// sent), and every item of it as sent, by which a rendering re-emits the
// client's own bytes.
type openaiInput struct {
	instructions []json.RawMessage
	items        []json.RawMessage
	// compaction marks the client's own summarization call (the Codex
	// CLI's request_kind "compaction"): managed, so that it fits, but not
	// a round of the conversation.
	compaction bool
	// keys are the items' OriginalKeys the process worked out, by the
	// items' digests under the tenant (originalsOf).
	keys   *memo[string]
	tenant string
}

// originalsOf indexes the items of the client's messages at positions:
// those Mnemos changed, whose other items it renders afresh. Each item's
// key is worked out once for its bytes (in.keys), not every round.
func (in *openaiInput) originalsOf(req *messagesRequest, positions []int64) *openaiwire.Originals {
	var items []json.RawMessage
	var keys []string
	for _, p := range positions {
		its, err := jsonwalk.SplitArray(req.messages[p])
		if err != nil {
			continue
		}
		for _, it := range its {
			d := messageDigest(in.tenant, it)
			key, ok := in.keys.get(d)
			if !ok {
				key, _ = openaiwire.OriginalKey(it) // "" for no JSON: never handed out
				in.keys.put(d, key)
			}
			items, keys = append(items, it), append(keys, key)
		}
	}
	return openaiwire.NewOriginalsKeyed(items, keys)
}

// readConversation splits the request's conversation field into its
// messages (req.messages): for the Messages API each message as sent; for
// OpenAI's APIs each message held as the JSON array of the items it folds
// (openaiwire's spans), after the instructions.
func (d *door) readConversation(req *messagesRequest) error {
	raw, ok := req.fields[d.field]
	if !ok {
		return nil
	}
	if !d.openai() {
		var err error
		if req.messages, err = jsonwalk.SplitArray(raw); err != nil {
			return fmt.Errorf("%s: want an array of messages", d.field)
		}
		return nil
	}
	in := &openaiInput{compaction: req.client != nil && codexCompaction(req.client)}
	req.openai = in
	if trimmed := bytes.TrimSpace(raw); d == responsesDoor && len(trimmed) > 0 && trimmed[0] == '"' {
		var text string
		if json.Unmarshal(trimmed, &text) == nil {
			// A string input is one user message.
			item, err := turn.Marshal(map[string]any{"type": "message", "role": "user", "content": text})
			if err != nil {
				return err
			}
			raw = append(append([]byte{'['}, item...), ']')
		}
	}
	items, err := jsonwalk.SplitArray(raw)
	if err != nil {
		return fmt.Errorf("%s: want an array of %s", d.field, d.elements)
	}
	in.items = items
	// Split as the mapping folds them, each message mapped only when it is
	// needed (turnAt): most of a request is what the round before sent.
	spans := openaiwire.ChatSpans
	if d == responsesDoor {
		spans = openaiwire.ResponsesSpans
	}
	n, lens := spans(items)
	in.instructions = items[:n]
	req.messages = make([]json.RawMessage, len(lens))
	for i, l := range lens {
		req.messages[i] = itemsArray(items[n : n+l])
		n += l
	}
	return nil
}

// decode reads message i of a request that came in by d as a turn
// message.
func (d *door) decode(i int, data []byte) (turn.Message, error) {
	if !d.openai() {
		return decodeMessage(i, data)
	}
	items, err := jsonwalk.SplitArray(data)
	if err != nil {
		return turn.Message{}, fmt.Errorf("message %d: %w", i, err)
	}
	read := openaiwire.ChatMessage
	if d == responsesDoor {
		read = openaiwire.ResponsesMessage
	}
	m, err := read(items)
	if err != nil {
		return turn.Message{}, fmt.Errorf("message %d: %w", i, err)
	}
	return m, nil
}

// itemsArray is items as one JSON array.
func itemsArray(items []json.RawMessage) json.RawMessage {
	size := 2
	for _, it := range items {
		size += len(it) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	return append(out, ']')
}

// sessionOf names the session a request belongs to ("" when none does).
// Messages API: Claude Code's session header, else the session_id inside
// the JSON string of metadata.user_id, else X-Mnemos-Session. OpenAI's:
// the session-id header (the Codex CLI's), else X-Mnemos-Session, else
// the request's prompt_cache_key.
func (d *door) sessionOf(r *http.Request, fields map[string]json.RawMessage) string {
	if !d.openai() {
		return sessionOf(r, fields)
	}
	if id := r.Header.Get(headerSessionID); id != "" {
		return id
	}
	if id := r.Header.Get(httpapi.HeaderAgentSession); id != "" {
		return id
	}
	var key string
	_ = json.Unmarshal(fields["prompt_cache_key"], &key)
	return key
}

// headerSessionID is the session header of the Codex CLI.
const headerSessionID = "Session-Id"

// codexCompaction reports whether a request is the Codex CLI's own
// summarization call: its x-codex-turn-metadata names request_kind
// "compaction".
func codexCompaction(r *http.Request) bool {
	raw := r.Header.Get("X-Codex-Turn-Metadata")
	if raw == "" {
		return false
	}
	var meta struct {
		RequestKind string `json:"request_kind"`
	}
	return json.Unmarshal([]byte(raw), &meta) == nil && meta.RequestKind == "compaction"
}

// openaiBody is an OpenAI request with its conversation replaced by msgs
// — each the client's items as sent (a JSON array, keepUnchanged kept
// it) or a message Mnemos rendered (a JSON object, in the Messages API's
// shape) — after the client's instructions and the memory section, every
// other field as the client sent it. A rendered message's items are the
// client's own bytes wherever they are the same JSON as an item it sent.
func openaiBody(d *door, req *messagesRequest, section [][]byte, msgs []json.RawMessage) ([]byte, error) {
	in := req.openai
	items := make([]json.RawMessage, 0, len(in.instructions)+len(msgs)+1)
	items = append(items, in.instructions...)
	if memory := sectionText(section); memory != "" {
		item, err := instructionItem(d, memory)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	var originals *openaiwire.Originals
	for i, m := range msgs {
		m = bytes.TrimSpace(m)
		if len(m) > 0 && m[0] == '[' {
			its, err := jsonwalk.SplitArray(m)
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			items = append(items, its...)
			continue
		}
		var tm turn.Message
		if err := json.Unmarshal(m, &tm); err != nil {
			return nil, fmt.Errorf("rendered message %d: %w", i, err)
		}
		if originals == nil {
			originals = in.originalsOf(req, req.changed)
		}
		var its []json.RawMessage
		var err error
		if d == responsesDoor {
			its, err = openaiwire.ResponsesItems([]turn.Message{tm}, originals)
		} else {
			its, err = openaiwire.ChatMessages([]turn.Message{tm}, originals)
		}
		if err != nil {
			return nil, fmt.Errorf("rendered message %d: %w", i, err)
		}
		items = append(items, its...)
	}
	return encodeFields(req.fields, d.field, items)
}

// sectionText is the memory section's text: its blocks' texts, joined.
func sectionText(section [][]byte) string {
	var texts []string
	for _, raw := range section {
		var b struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &b) == nil && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n\n")
}

// instructionItem is text as an instruction of the door's: a developer
// message item of the Responses API, a system message of Chat Completions
// (which every OpenAI-compatible server takes).
func instructionItem(d *door, text string) (json.RawMessage, error) {
	if d == responsesDoor {
		return turn.Marshal(map[string]any{"type": "message", "role": "developer",
			"content": []map[string]string{{"type": "input_text", "text": text}}})
	}
	return turn.Marshal(map[string]string{"role": "system", "content": text})
}

// noUpstream is the error code of a request whose tenant has no upstream
// for the door.
func (d *door) noUpstream() string {
	if d.openai() {
		return "no_upstream"
	}
	return "api_error"
}

// unreachable is the error code of an upstream that did not answer.
func (d *door) unreachable() string {
	if d.openai() {
		return "upstream_unreachable"
	}
	return "api_error"
}

// providerName is the door's provider as the API's users name it.
func (d *door) providerName() string {
	if d.openai() {
		return "OpenAI"
	}
	return "Anthropic"
}

// relays reports whether the client gets an answer's header (by its
// lower-case name): what the API's clients read.
func (d *door) relays(name string) bool {
	switch {
	case name == "content-type" || strings.HasPrefix(name, "retry-after"):
		return true
	case d.openai():
		return name == "x-request-id" || strings.HasPrefix(name, "openai-") || strings.HasPrefix(name, "x-ratelimit-")
	default:
		return name == "request-id" || strings.HasPrefix(name, "anthropic-") || name == "x-should-retry"
	}
}

// relay copies the upstream's answer to the client as it comes and reads
// the round's reply from it.
func (d *door) relay(w http.ResponseWriter, resp *http.Response) (reply, error) {
	if !d.openai() {
		return relayReply(w, resp)
	}
	if !eventStream(resp) {
		data, err := relayWhole(w, resp)
		if err != nil {
			return reply{}, err
		}
		if d == responsesDoor {
			return parsedReply(openaiwire.ParseResponse(data))
		}
		return parsedReply(openaiwire.ParseChatCompletion(data))
	}
	var s answerStream = &responsesStream{}
	if d == chatDoor {
		s = &chatStream{}
	}
	err := relayEvents(w, resp, s.Add)
	rep, done := s.reply()
	if done != nil {
		return reply{}, errors.Join(err, done)
	}
	// The client had the whole answer once its last event was relayed: it
	// may leave before the upstream's stream ends.
	return rep, nil
}

// answerStream assembles an OpenAI stream's answer event by event.
type answerStream interface {
	Add(event []byte) error
	reply() (reply, error)
}

type responsesStream struct{ openaiwire.ResponsesStream }

func (s *responsesStream) reply() (reply, error) { return parsedReply(s.Answer()) }

type chatStream struct{ openaiwire.ChatStream }

func (s *chatStream) reply() (reply, error) { return parsedReply(s.Answer()) }

// openaiAnswer is an OpenAI answer as the round's response.
type openaiAnswer interface {
	openaiwire.ResponsesAnswer | openaiwire.ChatAnswer
}

// parsedReply is an answer read (or the error reading it) as the round's
// reply.
func parsedReply[A openaiAnswer](a A, err error) (reply, error) {
	if err != nil {
		return reply{}, err
	}
	var m turn.Message
	var usage *turn.Usage
	switch a := any(a).(type) {
	case openaiwire.ResponsesAnswer:
		m, err = a.Message()
		usage = a.Usage
	case openaiwire.ChatAnswer:
		m, err = a.Turn()
		usage = a.Usage
	}
	if err != nil {
		return reply{}, err
	}
	rep := reply{Role: "assistant", Content: m.Content, StopReason: m.StopReason}
	if usage != nil {
		rep.Usage = *usage
	}
	return rep, nil
}

// forwardOpenAI sends body to an OpenAI upstream's path with the client's
// headers — every one but its credentials, Mnemos's own and those of the
// connection — and the upstream's key.
func (h *Handler) forwardOpenAI(ctx context.Context, r *http.Request, to Upstream, path string, body []byte) (*http.Response, error) {
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(to.URL, "/")+path, bytes.NewReader(body)) //nolint:gosec // the operator's upstream and a fixed path
	if err != nil {
		return nil, err
	}
	for name, values := range r.Header {
		if forwardsHeader(strings.ToLower(name)) {
			up.Header[name] = values
		}
	}
	up.Header.Set("Content-Type", "application/json")
	up.Header.Set("Authorization", "Bearer "+to.Key)
	return h.cfg.UpstreamClient.Do(up) //nolint:gosec // the URL is the operator's configured upstream, not the client's
}

// forwardsHeader reports whether a client's header (by its lower-case
// name) goes up with an OpenAI request.
func forwardsHeader(name string) bool {
	switch name {
	case "authorization", "x-api-key", "cookie", "host", "content-length", "content-type", "accept-encoding",
		"connection", "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade":
		return false
	}
	return !strings.HasPrefix(name, "x-mnemos-")
}

// canonDigest is a message's canonDigest as the door's clients send it
// back. An OpenAI client echoes the answer's items with what it does not
// keep of them left out or set to null (the Codex CLI adds "content": null
// to a reasoning item it got without one; the Go SDK leaves out a Chat
// message's null content and refusal), and may drop their ids and
// statuses: what an item holds besides its content — its id, its status,
// its fields that are null, the form its content came in, a part's type
// and its empty fields — is not part of the conversation.
func (d *door) canonDigest(m turn.Message) (digest, error) {
	if !d.openai() {
		return canonDigest(m)
	}
	content := make(turn.Content, len(m.Content))
	for i, b := range m.Content {
		var err error
		if b.Type == openaiwire.BlockItem && len(b.Raw) > 0 {
			if b.Raw, err = without(b.Raw, itemState, "item"); err != nil {
				return digest{}, err
			}
		}
		if len(b.Source) > 0 {
			if b.Source, err = without(b.Source, itemState, "openai", "item"); err != nil {
				return digest{}, err
			}
			if b.Source, err = without(b.Source, partState, "openai", "part"); err != nil {
				return digest{}, err
			}
			if b.Source, err = without(b.Source, func(k string, _ json.RawMessage) bool { return k == "as" }, "openai"); err != nil {
				return digest{}, err
			}
		}
		content[i] = b
	}
	return canonDigest(turn.Message{Role: m.Role, Content: content})
}

// partState reports whether a field of what a block keeps of its content
// part is not the conversation's: its type (which the block carries), or
// a field that holds nothing, null, [] or {} (the Codex CLI echoes an
// output_text part without the empty annotations the answer had).
func partState(k string, v json.RawMessage) bool {
	if k == "type" {
		return true
	}
	switch string(bytes.Join(bytes.Fields(v), nil)) {
	case "null", "[]", "{}":
		return true
	}
	return false
}

// sameAsSent reports whether the rendering of the client's message at
// position p (rendered, in the Messages API's shape) is that message as
// the door's clients send it back (canonDigest): for an OpenAI client,
// one whose items differ only in what it drops of an answer (ids,
// statuses, nulls) is its own, and goes up as it sent it.
func (d *door) sameAsSent(req *messagesRequest, p int64, rendered []byte) (bool, error) {
	var m turn.Message
	if err := json.Unmarshal(rendered, &m); err != nil {
		return false, err
	}
	canon, err := d.canonDigest(turn.Message{Role: m.Role, Content: withoutCacheControl(m.Content)})
	if err != nil {
		return false, err
	}
	return canon == req.canons[p], nil
}

// itemState reports whether a field of what a block keeps of its item is
// not the conversation's: the item's id, its status, a null, or its type
// and role (which the block and its message carry).
func itemState(k string, v json.RawMessage) bool {
	return k == "id" || k == "status" || k == "type" || k == "role" || string(bytes.TrimSpace(v)) == "null"
}

// without is raw with the fields drop names left out of the object at
// path (keys of nested objects), and every object on the path left empty
// by it left out too (nil when raw is); raw as it is when it holds no such
// object. A client that drops what a block keeps of its item sends a block
// with no note at all.
func without(raw json.RawMessage, drop func(string, json.RawMessage) bool, path ...string) (json.RawMessage, error) {
	top, ok := objectOf(raw)
	if !ok {
		return raw, nil
	}
	obj := top
	chain := []map[string]json.RawMessage{top}
	for _, key := range path {
		if obj, ok = objectOf(obj[key]); !ok {
			return raw, nil
		}
		chain = append(chain, obj)
	}
	for k, v := range obj {
		if drop(k, v) {
			delete(obj, k)
		}
	}
	// Written back up the path.
	for i := len(path) - 1; i >= 0; i-- {
		if len(chain[i+1]) == 0 {
			delete(chain[i], path[i])
			continue
		}
		enc, err := json.Marshal(chain[i+1])
		if err != nil {
			return nil, err
		}
		chain[i][path[i]] = enc
	}
	if len(top) == 0 {
		return nil, nil
	}
	return json.Marshal(top)
}

// objectOf is raw's fields when raw is a JSON object.
func objectOf(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	return obj, json.Unmarshal(raw, &obj) == nil && obj != nil
}

// openaiPrefix is an OpenAI request's prefix for its round's event: its
// instructions (the instructions field and the instruction items its input
// opens with) and its tools, counted by the model's tokenizer
// (tokens.CounterFor) once per prefix and process. The accountant counts
// it after a compaction, when no usage includes it yet. nil for a
// Messages API request, and for one without instructions or tools.
func (h *Handler) openaiPrefix(req *messagesRequest) *turn.RequestPrefix {
	in := req.openai
	if in == nil {
		return nil
	}
	sum := sha256.New()
	for _, raw := range append([]json.RawMessage{json.RawMessage(req.model), req.fields["instructions"], req.fields["tools"]}, in.instructions...) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(raw)))
		sum.Write(n[:])
		sum.Write(raw)
	}
	hash := hex.EncodeToString(sum.Sum(nil))
	count, ok := h.prefixTokens.Get(hash)
	if !ok {
		counter := tokens.CounterFor(req.model)
		var text string
		_ = json.Unmarshal(req.fields["instructions"], &text)
		count = counter.Text(text) + counter.Text(string(req.fields["tools"]))
		for _, raw := range in.instructions {
			count += counter.Text(string(raw))
		}
		h.prefixTokens.Put(hash, count)
	}
	if count == 0 {
		return nil // nothing before the conversation: a hash alone would name nothing the accountant holds
	}
	return &turn.RequestPrefix{Tokens: count, Hash: hash}
}
