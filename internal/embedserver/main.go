// Command embedserver serves the scripted embeddings API of
// internal/testkit/embedtest on a local port, so that a Mnemos run by hand
// (`make run`, `mnemos eval search`) can have embeddings without a model:
//
//	go run ./internal/embedserver -addr 127.0.0.1:8091 &
//	MNEMOS_EMBED_BASE_URL=http://127.0.0.1:8091/v1 MNEMOS_EMBED_MODEL=scripted make run
//
// Its vectors are hashed bags of stemmed words (see embedtest.Server.Vector):
// deterministic, close for texts that share words, and for words -concepts
// maps to one concept.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/mnemos-ai/mnemos/internal/testkit/embedtest"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "embedserver:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("embedserver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8091", "where to listen")
	dims := fs.Int("dimensions", embedtest.DefaultDimensions, "the length of the vectors unless a request asks for another")
	concepts := fs.String("concepts", "", `a JSON file mapping words to the concept they count as, e.g. {"automobile": "car"}`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := embedtest.Config{Dimensions: *dims}
	if *concepts != "" {
		m, err := readConcepts(*concepts)
		if err != nil {
			return err
		}
		cfg.Concepts = m
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", *addr)
	if err != nil {
		return err
	}
	log.Printf("scripted embeddings on http://%s/v1 (%d dimensions, %d concepts)", ln.Addr(), *dims, len(cfg.Concepts))
	srv := &http.Server{Handler: embedtest.New(cfg), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// readConcepts reads a word → concept map; each word is read as the server
// reads texts (lowercase, stemmed), so "Automobiles" maps as "automobile".
func readConcepts(path string) (map[string]string, error) {
	data, err := os.ReadFile(path) //nolint:gosec // a file the operator names
	if err != nil {
		return nil, err
	}
	var raw map[string]string
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: want a JSON object of words to concepts: %w", path, err)
	}
	out := make(map[string]string, len(raw))
	for word, concept := range raw {
		terms, target := embedtest.Terms(word), embedtest.Terms(concept)
		if len(terms) != 1 || len(target) != 1 {
			return nil, fmt.Errorf("%s: %q → %q: want one word each, not a stop word", path, word, concept)
		}
		out[terms[0]] = target[0]
	}
	return out, nil
}
