package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Exact preflights (proxy.preflight_exact_percent): when much of a
// preflight's count is estimated, the tenant's upstream counts that part
// with count_tokens, and its figure takes the estimate's place. What a
// response measured stays as it is; what is counted is what no response has
// measured yet:
//   - after a response, the request's new messages (one call);
//   - before any response, the system prompt, tools and new messages in one
//     call; when the request carries system and tools whole, a second call
//     counts the messages alone, so that the difference, the prefix's exact
//     size, is kept by its hash for the rounds that name only the hash (the
//     round after a client's compaction).
//
// count_tokens validates a request as the Messages API does: a tool result
// must follow its tool call. The new messages are therefore counted as one
// user message of their content (a tool result's text and images in its
// place, a tool call as its name and input, thinking as its text): the
// same content, a few tokens of framing apart.

// ExactPreflight is the count f would have with its estimated part
// counted by the tenant's upstream, or false when it cannot be (no
// upstream, nothing countable, the upstream failed: the estimate stands).
func (h *Handler) ExactPreflight(ctx context.Context, r *http.Request, tenant, model string, f accounting.Forecast, prefix *turn.RequestPrefix) (int64, bool) {
	if model == "" || f.New <= 0 || (!f.HasUsage && f.Prefix <= 0) {
		return 0, false
	}
	content, ok := countableContent(f.Shown)
	if !ok {
		return 0, false
	}
	up, err := h.upstreamOf(ctx, tenant, store.ProviderAnthropic)
	if err != nil || up.URL == "" {
		return 0, false
	}
	count := func(system, tools json.RawMessage, content []json.RawMessage) (int64, error) {
		return h.upstreamCount(ctx, r, up, model, system, tools, content)
	}
	outcome := func(exact int64, err error) (int64, bool) {
		if err != nil {
			h.Log.Warn("preflight: count_tokens failed; answering the estimate", "tenant", tenant, "err", err)
			h.metrics.preflightExact.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "failed")))
			return 0, false
		}
		o := "under"
		if exact >= f.Count {
			o = "over"
		}
		h.metrics.preflightExact.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", o)))
		return exact, true
	}
	if f.HasUsage {
		n, err := count(nil, nil, content)
		return outcome(f.Measured+f.Stored+n, err)
	}
	key := prefixKey(tenant, model, f.PrefixHash)
	if prefix != nil && (len(prefix.System) > 0 || len(prefix.Tools) > 0) && prefix.Tokens == 0 {
		whole, err := count(prefix.System, prefix.Tools, content)
		if err != nil {
			return outcome(0, err)
		}
		if f.PrefixHash != "" {
			if alone, err := count(nil, nil, content); err == nil && whole > alone {
				h.prefixCounts.Put(key, whole-alone)
			}
		}
		return outcome(whole+f.Stored, nil)
	}
	p := f.Prefix
	if exact, ok := h.prefixCounts.Get(key); ok && f.PrefixHash != "" && (prefix == nil || prefix.Tokens == 0) {
		p = exact
	}
	n, err := count(nil, nil, content)
	return outcome(p+f.Stored+n, err)
}

// upstreamCount asks the upstream's count_tokens for one user message of
// content, after system and tools when given.
func (h *Handler) upstreamCount(ctx context.Context, r *http.Request, up Upstream, model string, system, tools json.RawMessage, content []json.RawMessage) (int64, error) {
	req := map[string]any{
		"model":    model,
		"messages": []map[string]any{{"role": "user", "content": content}},
	}
	if len(system) > 0 {
		req["system"] = system
	}
	if len(tools) > 0 {
		req["tools"] = tools
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	return h.countUp(ctx, r, up, body)
}

// countUp sends body to the upstream's count_tokens, with r's Anthropic
// headers, and reads its figure; it waits at most exactCountWait.
func (h *Handler) countUp(ctx context.Context, r *http.Request, up Upstream, body []byte) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, exactCountWait)
	defer cancel()
	resp, err := h.forward(cctx, r, up, "/v1/messages/count_tokens", body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("the upstream answered %s", resp.Status)
	}
	var counted struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&counted); err != nil {
		return 0, fmt.Errorf("reading the upstream's answer: %w", err)
	}
	if counted.InputTokens <= 0 {
		return 0, errors.New("the upstream's answer has no input_tokens")
	}
	return counted.InputTokens, nil
}

// countableContent is msgs' content as blocks a lone user message may
// hold (see the package comment above); false when there is none, or a
// block whose content Mnemos does not know.
func countableContent(msgs []turn.Message) ([]json.RawMessage, bool) {
	var out []json.RawMessage
	add := func(v any) {
		if b, err := json.Marshal(v); err == nil {
			out = append(out, b)
		}
	}
	text := func(s string) {
		if s != "" {
			add(map[string]string{"type": turn.BlockText, "text": s})
		}
	}
	var block func(b turn.Block) bool
	block = func(b turn.Block) bool {
		switch b.Type {
		case turn.BlockText:
			text(b.Text)
		case turn.BlockThinking:
			text(b.Thinking)
		case turn.BlockRedactedThinking:
			// Encrypted: the model reads it, a count cannot be asked for it.
		case turn.BlockToolUse:
			text(b.Name + " " + string(b.Input))
		case turn.BlockToolResult:
			if b.Content != nil {
				for _, inner := range *b.Content {
					if !block(inner) {
						return false
					}
				}
			}
		case turn.BlockImage, turn.BlockDocument:
			add(map[string]json.RawMessage{"type": json.RawMessage(`"` + b.Type + `"`), "source": b.Source})
		default:
			return false
		}
		return true
	}
	for _, m := range msgs {
		for _, b := range m.Content {
			if !block(b) {
				return nil, false
			}
		}
	}
	return out, len(out) > 0
}

// prefixKey names a prefix's exact size: per tenant and model, since each
// model has its own tokenizer.
func prefixKey(tenant, model, hash string) string {
	return tenant + "\x00" + model + "\x00" + hash
}
