package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// Defaults of Config.
const (
	DefaultModel = "text-embedding-3-small"
	// DefaultBatch is the most texts one request carries; the API takes
	// up to 2,048, and smaller requests fail and retry more cheaply.
	DefaultBatch = 64
	// DefaultMaxInputBytes bounds one text: about 4,000 tokens of English,
	// half the 8,192 tokens OpenAI's embedding models read.
	DefaultMaxInputBytes = 16000
	DefaultTimeout       = 30 * time.Second
)

// Config configures an OpenAI-compatible embedder.
type Config struct {
	// BaseURL is the server's API root, e.g. https://api.openai.com/v1 or
	// http://localhost:11434/v1. Required.
	BaseURL string
	// APIKey is sent as a bearer token; a local server may need none.
	APIKey string
	// Model is the embedding model (DefaultModel).
	Model string
	// Dimensions, when positive, asks for vectors of that length (the
	// text-embedding-3 models shorten theirs); 0 takes the model's.
	Dimensions int
	// Batch is the most texts one request carries (DefaultBatch); Embed
	// splits longer lists.
	Batch int
	// MaxInputBytes clips each text (DefaultMaxInputBytes).
	MaxInputBytes int
	// Timeout bounds one request (DefaultTimeout).
	Timeout time.Duration
	// HTTPClient replaces the default HTTP client.
	HTTPClient *http.Client
}

// Enabled reports whether cfg names an endpoint: embeddings are off
// without one.
func (c Config) Enabled() bool { return c.BaseURL != "" }

// OpenAI embeds through an OpenAI-compatible POST /embeddings. Its SDK
// client never retries: the caller decides (a consumer's redelivery, a
// search that goes on lexically).
type OpenAI struct {
	client sdk.Client
	cfg    Config
	// dims is the length of the vectors answered so far (0: none yet).
	dims atomic.Int64
}

// NewOpenAI returns an embedder for cfg. Environment variables the SDK
// would read (OPENAI_API_KEY, OPENAI_BASE_URL) are overridden by cfg.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("embed: base URL %q: want an absolute URL such as https://api.openai.com/v1", cfg.BaseURL)
	}
	if cfg.Dimensions < 0 {
		return nil, fmt.Errorf("embed: dimensions %d: want 0 (the model's) or more", cfg.Dimensions)
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.MaxInputBytes <= 0 {
		cfg.MaxInputBytes = DefaultMaxInputBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(0),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	e := &OpenAI{client: sdk.NewClient(opts...), cfg: cfg}
	e.dims.Store(int64(cfg.Dimensions))
	return e, nil
}

// Model is the configured model.
func (e *OpenAI) Model() string { return e.cfg.Model }

// Dimensions is the configured length, else the length answered so far.
func (e *OpenAI) Dimensions() int { return int(e.dims.Load()) }

// Embed embeds texts in requests of at most Config.Batch texts each.
func (e *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.cfg.Batch {
		vs, err := e.embedBatch(ctx, texts[start:min(start+e.cfg.Batch, len(texts))])
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// embedBatch makes one request and checks its answer: one vector per
// input, each index once, every vector of the same length.
func (e *OpenAI) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	inputs := make([]string, len(texts))
	for i, t := range texts {
		if t == "" {
			return nil, &llm.Error{Kind: llm.KindRequest, Err: fmt.Errorf("%w (input %d)", ErrEmptyText, i)}
		}
		inputs[i] = Clip(t, e.cfg.MaxInputBytes)
	}
	params := sdk.EmbeddingNewParams{
		Model:          e.cfg.Model,
		Input:          sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs},
		EncodingFormat: sdk.EmbeddingNewParamsEncodingFormatFloat,
	}
	if e.cfg.Dimensions > 0 {
		params.Dimensions = sdk.Int(int64(e.cfg.Dimensions))
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	res, err := e.client.Embeddings.New(ctx, params)
	if err != nil {
		return nil, classify(err)
	}
	return e.vectors(res, len(texts))
}

// vectors reads an answer of n vectors, each normalized.
func (e *OpenAI) vectors(res *sdk.CreateEmbeddingResponse, n int) ([][]float32, error) {
	bad := func(format string, args ...any) error {
		return &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("embed: "+format, args...)}
	}
	if len(res.Data) != n {
		return nil, bad("asked for %d vectors, got %d", n, len(res.Data))
	}
	out := make([][]float32, n)
	dims := int(e.dims.Load())
	for _, d := range res.Data {
		i := int(d.Index)
		if i < 0 || i >= n || out[i] != nil {
			return nil, bad("vector index %d out of range or repeated", d.Index)
		}
		if len(d.Embedding) == 0 || dims > 0 && len(d.Embedding) != dims {
			return nil, bad("vector %d has %d dimensions, want %d", i, len(d.Embedding), dims)
		}
		dims = len(d.Embedding)
		v := make([]float32, dims)
		for j, x := range d.Embedding {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, bad("vector %d holds %v", i, x)
			}
			v[j] = float32(x)
		}
		out[i] = Normalize(v)
	}
	e.dims.CompareAndSwap(0, int64(dims))
	return out, nil
}

// classify turns the SDK's error into an *llm.Error by the HTTP status, as
// the model providers do.
func classify(err error) error {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return llm.TransportError("embed", err)
	}
	e := &llm.Error{
		Kind:   llm.StatusKind(apiErr.StatusCode),
		Status: apiErr.StatusCode,
		Err:    fmt.Errorf("embed: %s (type %q, code %q)", apiErr.Message, apiErr.Type, apiErr.Code),
	}
	if apiErr.Response != nil {
		e.RetryAfter = llm.RetryAfter(apiErr.Response.Header, time.Now())
	}
	return e
}
