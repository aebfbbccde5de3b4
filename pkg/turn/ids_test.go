package turn_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// schemaRule is one $defs entry of the committed schema: its pattern and
// its length bounds.
type schemaRule struct {
	pattern *regexp.Regexp
	min     int
	max     int
}

func (r schemaRule) accepts(s string) bool {
	n := len([]rune(s)) // JSON Schema counts characters
	return n >= r.min && n <= r.max && r.pattern.MatchString(s)
}

func schemaRules(t testing.TB) (token, id schemaRule) {
	t.Helper()
	var doc struct {
		Defs map[string]struct {
			Pattern   string `json:"pattern"`
			MinLength int    `json:"minLength"`
			MaxLength int    `json:"maxLength"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(turn.SchemaJSON, &doc))
	rule := func(name string) schemaRule {
		d := doc.Defs[name]
		require.NotEmpty(t, d.Pattern, name)
		return schemaRule{pattern: regexp.MustCompile(d.Pattern), min: d.MinLength, max: d.MaxLength}
	}
	return rule("token"), rule("id")
}

func checkIDRules(t *testing.T, token, id schemaRule, s string) {
	if got, want := turn.ValidToken(s), token.accepts(s); got != want {
		t.Fatalf("ValidToken(%q) = %v, the schema's token says %v", s, got, want)
	}
	if got, want := turn.ValidID(s), id.accepts(s); got != want {
		t.Fatalf("ValidID(%q) = %v, the schema's id says %v", s, got, want)
	}
	if turn.ValidToken(s) && !bus.ValidToken(s) {
		t.Fatalf("token %q is not a NATS subject token", s)
	}
}

// TestIDRulesAreTheSchemas: the Go checks accept exactly what the schema
// accepts, so a session the schema lets in can always be addressed by the
// API, and a token is always a NATS subject token.
func TestIDRulesAreTheSchemas(t *testing.T) {
	t.Parallel()
	token, id := schemaRules(t)
	for _, s := range []string{
		"s1", "1b7c4f0e-2c4d-4a55-9f3e-0d7a9f1c2b3a", "agent_x", strings.Repeat("a", 128), strings.Repeat("a", 129),
		"", "-x", "_x", "a.b", "a:b", ".a", "a/b", "a'b", "a%2F", "a b", "a\x00b", "a\xffb", "é", "a\n", "a*", "a>",
	} {
		checkIDRules(t, token, id, s)
	}
	require.True(t, turn.ValidToken("0c1d9a2e-4b7f-4c8e-9d2a-5f6e7a8b9c0d"), "Claude Code's session ids are tokens")
	require.False(t, turn.ValidToken("a/b"))
	require.True(t, turn.ValidID("evt.1:2"))
}

// FuzzIDRules: for any string, ValidToken and ValidID agree with the
// schema's token and id rules, and a token is a NATS subject token.
func FuzzIDRules(f *testing.F) {
	for _, s := range []string{"s1", "a.b", "a/b", "a\x00", "\xff", strings.Repeat("z", 129), "é"} {
		f.Add(s)
	}
	token, id := schemaRules(f)
	f.Fuzz(func(t *testing.T, s string) {
		checkIDRules(t, token, id, s)
	})
}

func TestDuplicateKey(t *testing.T) {
	t.Parallel()
	many := func(dup bool) string {
		var sb strings.Builder
		sb.WriteString(`{"x":[{`)
		for i := range 5_000 {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `"k%d":%d`, i, i)
		}
		if dup {
			sb.WriteString(`,"k4999":0`)
		}
		sb.WriteString(`}]}`)
		return sb.String()
	}
	for _, c := range []struct {
		data string
		key  string
	}{
		{`{}`, ""},
		{`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, ""},
		{`{"a":"\"a\"","b":["a","a"],"\"a":1}`, ""},
		{`["a","a",{"a":1}]`, ""},
		{`{"a":1,"a":2}`, "a"},
		{`{"a":{"b":1,"c":{"d":1,"d":2}}}`, "d"},
		{`{"a":1,"\u0061":2}`, "a"},
		{`{"a\"":1,"a\u0022":2}`, `a"`},
		{many(false), ""},
		{many(true), "k4999"},
	} {
		at, key := turn.DuplicateKey([]byte(c.data))
		require.True(t, json.Valid([]byte(c.data)), c.data)
		if c.key == "" {
			require.Equal(t, -1, at, "%.80s: no key repeats, found %q", c.data, key)
			continue
		}
		require.Equal(t, c.key, key, "%.80s", c.data)
		require.Positive(t, at)
	}
}
