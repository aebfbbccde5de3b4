// Package embed turns texts into vectors for the vector half of search (see
// docs/memory.md, "Embeddings"): an Embedder interface, its implementation
// over an OpenAI-compatible /v1/embeddings endpoint (OpenAI, vLLM, Ollama,
// llama.cpp, LiteLLM, through the official OpenAI Go SDK), and the vector
// arithmetic search ranks by. Embeddings are off unless a deployment
// configures an endpoint; without one, search stays lexical.
package embed

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Embedder turns texts into vectors of one model.
type Embedder interface {
	// Model names the model the vectors come from; vectors of different
	// models are never compared.
	Model() string
	// Dimensions is the length of the vectors: the configured length, else
	// the length the model answered with (0 before the first answer).
	Dimensions() int
	// Embed returns one vector per text, in order, each of unit length
	// (so the cosine of two is their dot product). No text may be empty.
	// Errors a caller may act on are *llm.Error (llm.Retryable says whether
	// to try again).
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ErrEmptyText refuses an empty text: the API refuses it too.
var ErrEmptyText = errors.New("embed: an empty text has no vector")

// Normalize scales v to unit length in place and returns it. A zero
// vector stays zero.
func Normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return v
	}
	inv := 1 / math.Sqrt(sum)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
	return v
}

// Dot is the dot product of a and b over their common length: the cosine of
// two unit vectors.
func Dot(a, b []float32) float32 {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// Encode writes v as it is stored: 4 bytes per element, little-endian
// IEEE 754 float32.
func Encode(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// Decode reads a vector Encode wrote into dst (reused when long enough).
func Decode(dst []float32, b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("embed.Decode: %d bytes is not a whole number of float32", len(b))
	}
	n := len(b) / 4
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return dst, nil
}

// DotEncoded is Dot of q and a vector as Encode wrote it, without decoding
// it first: how search scores every stored vector of a scope.
func DotEncoded(q []float32, b []byte) float32 {
	n := min(len(q), len(b)/4)
	var s0, s1 float32
	i := 0
	for ; i+2 <= n; i += 2 {
		s0 += q[i] * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		s1 += q[i+1] * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i+4:]))
	}
	if i < n {
		s0 += q[i] * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return s0 + s1
}

// Clip cuts text to at most max bytes, at a rune boundary: an embedding
// model reads a bounded input, and the start of a message says what it is
// about.
func Clip(text string, max int) string {
	if max <= 0 || len(text) <= max {
		return text
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}

// Best returns the indexes of the n highest of scores, best first; equal
// scores keep their order. It keeps n at a time, so ranking every vector
// of a scope costs one pass and no sort of the whole.
func Best(scores []float32, n int) []int {
	if n <= 0 {
		return nil
	}
	// h is a min-heap of indexes by (score, then later index first): its
	// root is the worst of the best kept so far.
	h := make([]int, 0, min(n, len(scores)))
	worse := func(a, b int) bool {
		if scores[a] != scores[b] {
			return scores[a] < scores[b]
		}
		return a > b
	}
	down := func(i int) {
		for {
			l, small := 2*i+1, i
			if l < len(h) && worse(h[l], h[small]) {
				small = l
			}
			if r := l + 1; r < len(h) && worse(h[r], h[small]) {
				small = r
			}
			if small == i {
				return
			}
			h[i], h[small] = h[small], h[i]
			i = small
		}
	}
	for i := range scores {
		switch {
		case len(h) < n:
			h = append(h, i)
			for j := len(h) - 1; j > 0; {
				p := (j - 1) / 2
				if !worse(h[j], h[p]) {
					break
				}
				h[j], h[p] = h[p], h[j]
				j = p
			}
		case worse(h[0], i):
			h[0] = i
			down(0)
		}
	}
	out := make([]int, len(h))
	for k := len(h) - 1; k >= 0; k-- {
		out[k] = h[0]
		h[0] = h[len(h)-1]
		h = h[:len(h)-1]
		down(0)
	}
	return out
}
