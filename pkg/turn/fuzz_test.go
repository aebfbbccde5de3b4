package turn_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// knownReasons are the reasons Decode itself may give.
var knownReasons = map[turn.Reason]bool{
	turn.ReasonTooLarge: true, turn.ReasonInvalidUTF8: true, turn.ReasonNULCharacter: true, turn.ReasonBadJSON: true,
	turn.ReasonUnknownSchema: true, turn.ReasonSchemaViolation: true, turn.ReasonNegativeUsage: true,
	turn.ReasonTenantMismatch: true, turn.ReasonSessionMismatch: true, turn.ReasonDuplicateUUID: true,
	turn.ReasonDuplicateKey: true,
}

// FuzzDecode: Decode never panics, refuses only with an *InputError that
// gives a known reason and a detail, and an event it accepts re-encodes with
// Marshal to bytes that decode to an equal event and encode to the same bytes.
// The seed corpus is in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, data := range roundTripEvents {
		f.Add([]byte(data))
	}
	opts := turn.DecodeOptions{Tenant: "acme"}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := turn.Decode(data, opts); err != nil {
			ie, ok := turn.AsInputError(err)
			if !ok {
				t.Fatalf("refused without an InputError: %T %v", err, err)
			}
			if !knownReasons[ie.Reason] || ie.Detail == "" {
				t.Fatalf("refused with reason %q and detail %q", ie.Reason, ie.Detail)
			}
			return
		}
		requireRoundTrip(t, data, opts)
	})
}

// TestFuzzSeeds keeps the committed corpus honest: seeds named valid_* are
// accepted and seeds named invalid_* are refused, so the fuzzer starts from
// both sides of every check.
func TestFuzzSeeds(t *testing.T) {
	t.Parallel()

	var valid, invalid int
	for name, data := range decodeSeeds(t) {
		_, err := turn.Decode(data, turn.DecodeOptions{Tenant: "acme"})
		switch {
		case strings.HasPrefix(name, "valid_"):
			valid++
			require.NoError(t, err, name)
		case strings.HasPrefix(name, "invalid_"):
			invalid++
			require.Error(t, err, name)
		}
	}
	require.Positive(t, valid)
	require.Positive(t, invalid)
}

// decodeSeeds reads FuzzDecode's committed corpus, by file name.
func decodeSeeds(t *testing.T) map[string][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	seeds := make(map[string][]byte, len(entries))
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		body, ok := strings.CutPrefix(string(raw), "go test fuzz v1\n[]byte(")
		require.True(t, ok, "%s: not a fuzz corpus file", e.Name())
		lit, ok := strings.CutSuffix(strings.TrimSpace(body), ")")
		require.True(t, ok, "%s: not a single []byte value", e.Name())
		data, err := strconv.Unquote(lit)
		require.NoError(t, err, e.Name())
		seeds[e.Name()] = []byte(data)
	}
	return seeds
}

// FuzzContent: content as the wire carries it (a string, or an array of
// blocks of any type with any fields, nested tool results included) either
// fails to decode with an error or decodes to content whose encoding
// decodes back to the same encoding: decoding never panics and encoding is
// stable. The seed corpus is in testdata/fuzz/FuzzContent.
func FuzzContent(f *testing.F) {
	f.Add([]byte(`"plain text"`))
	f.Add([]byte(`[{"type":"text","text":"a"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c turn.Content
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		out, err := turn.Marshal(c)
		if err != nil {
			t.Fatalf("decoded content does not encode: %v", err)
		}
		var again turn.Content
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("encoded content %q does not decode: %v", out, err)
		}
		out2, err := turn.Marshal(again)
		if err != nil {
			t.Fatalf("content does not encode a second time: %v", err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", out, out2)
		}
		if len(again) != len(c) {
			t.Fatalf("%d blocks became %d", len(c), len(again))
		}
	})
}
