package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
)

// USD is an amount of money in nano-dollars (10⁻⁹ US dollars), exact: money
// is never a float in Mnemos. Its JSON is a decimal number of dollars
// ("2.5", "0.000003"), read and written exactly; a string holding one is
// read too.
type USD int64

// Dollar is one US dollar.
const Dollar USD = 1_000_000_000

// maxUSD bounds amounts read from text, so that sums of many calls stay
// far from overflowing: a hundred million dollars.
const maxUSD = 100_000_000 * Dollar

// String is the amount in dollars, exact, without trailing zeros ("0.0123").
func (u USD) String() string { return decimalText(int64(u), 9) }

// MarshalJSON writes the amount as a JSON number of dollars.
func (u USD) MarshalJSON() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalJSON reads a JSON number (or a string holding one) of dollars
// with at most nine decimals.
func (u *USD) UnmarshalJSON(b []byte) error {
	n, err := parseDecimal(b, 9, int64(maxUSD))
	if err != nil {
		return fmt.Errorf("an amount of dollars: %w", err)
	}
	*u = USD(n)
	return nil
}

// ParseUSD reads an amount of dollars written as a decimal ("2.50").
func ParseUSD(s string) (USD, error) {
	var u USD
	err := u.UnmarshalJSON([]byte(s))
	return u, err
}

// Rate is the price of one token in nano-dollars, which is also the price
// of a million tokens in thousandths of a dollar. Its JSON is the price of
// a million tokens in dollars ("3", "0.30"), with at most three decimals:
// every list price is a whole number of tenths of a cent per million.
type Rate int64

// PerMillion is a rate of d dollars per million tokens, d given in
// thousandths of a dollar: PerMillion(3_000) is $3 per million tokens.
func PerMillion(milliDollars int64) Rate { return Rate(milliDollars) }

// maxRate bounds a rate read from text: $100,000 per million tokens. A
// call of a billion tokens at that rate still fits an int64 of nano-dollars.
const maxRate = 100_000 * 1_000

// String is the rate in dollars per million tokens.
func (r Rate) String() string { return decimalText(int64(r), 3) }

// MarshalJSON writes the rate as a JSON number of dollars per million tokens.
func (r Rate) MarshalJSON() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalJSON reads a JSON number (or a string holding one) of dollars
// per million tokens, with at most three decimals.
func (r *Rate) UnmarshalJSON(b []byte) error {
	n, err := parseDecimal(b, 3, maxRate)
	if err != nil {
		return fmt.Errorf("a price in dollars per million tokens: %w", err)
	}
	*r = Rate(n)
	return nil
}

// Price is what a model's tokens cost, by kind. CacheWrite is the price of
// a prompt-cache write of the default (5-minute) lifetime.
type Price struct {
	Input      Rate `json:"input"`
	Output     Rate `json:"output"`
	CacheWrite Rate `json:"cache_write"`
	CacheRead  Rate `json:"cache_read"`
}

// Cost is what usage u costs at p. The product of a token count and a rate
// is exact; counts beyond any real call saturate rather than wrap.
func (p Price) Cost(u Usage) USD {
	var total USD
	for _, part := range [][2]int64{
		{u.InputTokens, int64(p.Input)}, {u.OutputTokens, int64(p.Output)},
		{u.CacheWriteTokens, int64(p.CacheWrite)}, {u.CacheReadTokens, int64(p.CacheRead)},
	} {
		total = addSaturating(total, mulSaturating(part[0], part[1]))
	}
	return total
}

// UnmarshalJSON reads a price that names all four kinds and nothing else:
// a price that left one out would make those tokens free by accident.
func (p *Price) UnmarshalJSON(b []byte) error {
	var raw struct {
		Input      *Rate `json:"input"`
		Output     *Rate `json:"output"`
		CacheWrite *Rate `json:"cache_write"`
		CacheRead  *Rate `json:"cache_read"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("price: %w", err)
	}
	var missing []string
	for name, r := range map[string]*Rate{"input": raw.Input, "output": raw.Output, "cache_write": raw.CacheWrite, "cache_read": raw.CacheRead} {
		if r == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("price: names no %s (a price names input, output, cache_write and cache_read)", strings.Join(missing, ", "))
	}
	*p = Price{Input: *raw.Input, Output: *raw.Output, CacheWrite: *raw.CacheWrite, CacheRead: *raw.CacheRead}
	return nil
}

// Validate reports a price that cannot be: a negative rate.
func (p Price) Validate() error {
	for name, r := range map[string]Rate{"input": p.Input, "output": p.Output, "cache_write": p.CacheWrite, "cache_read": p.CacheRead} {
		if r < 0 || r > maxRate {
			return fmt.Errorf("%s must be between 0 and %s dollars per million tokens, got %s", name, Rate(maxRate), r)
		}
	}
	return nil
}

// Prices maps a model to its price. A key is a model family ("claude-sonnet-4-5")
// or a whole model name ("llama3.1:70b"); see Lookup for how a model's name
// finds its key.
type Prices map[string]Price

// DefaultPrices are the public list prices, in dollars per million tokens,
// of the models the model table knows (pkg/tokens), as of November 2025,
// and of the providers' default models (Claude Sonnet 5 and 5.5, GPT-5.4
// mini) and the OpenAI models the Codex CLI and the OpenAI door's agents
// default to (gpt-5, its mini and nano, 5.1, 5.2, o3, o4-mini), as of
// November 2026.
// Long-context (over 200K input tokens) and batch prices are not modelled.
// OpenAI bills cache writes as input; its models' cache_write is their
// input price.
func DefaultPrices() Prices {
	m := func(in, out, write, read int64) Price {
		return Price{Input: PerMillion(in), Output: PerMillion(out), CacheWrite: PerMillion(write), CacheRead: PerMillion(read)}
	}
	return Prices{
		"claude-sonnet-5-5": m(2_000, 10_000, 2_500, 200),
		"claude-sonnet-5":   m(2_000, 10_000, 2_500, 200),
		"gpt-5.4-mini":      m(750, 4_500, 750, 75),
		"claude-opus-4-5":   m(5_000, 25_000, 6_250, 500),
		"claude-sonnet-4-5": m(3_000, 15_000, 3_750, 300),
		"claude-haiku-4-5":  m(1_000, 5_000, 1_250, 100),
		"claude-opus-4-1":   m(15_000, 75_000, 18_750, 1_500),
		"claude-opus-4":     m(15_000, 75_000, 18_750, 1_500),
		"claude-sonnet-4":   m(3_000, 15_000, 3_750, 300),
		"claude-3-7-sonnet": m(3_000, 15_000, 3_750, 300),
		"claude-3-5-haiku":  m(800, 4_000, 1_000, 80),
		"claude-3-5-sonnet": m(3_000, 15_000, 3_750, 300),
		"claude-3-haiku":    m(250, 1_250, 300, 30),
		"gpt-5":             m(1_250, 10_000, 1_250, 125),
		"gpt-5-mini":        m(250, 2_000, 250, 25),
		"gpt-5-nano":        m(50, 400, 50, 5),
		"gpt-5.1":           m(1_250, 10_000, 1_250, 125),
		"gpt-5.2":           m(1_750, 14_000, 1_750, 175),
		"o3":                m(2_000, 8_000, 2_000, 500),
		"o4-mini":           m(1_100, 4_400, 1_100, 275),
		"gpt-4.1":           m(2_000, 8_000, 2_000, 500),
		"gpt-4.1-mini":      m(400, 1_600, 400, 100),
		"gpt-4.1-nano":      m(100, 400, 100, 25),
		"gpt-4o":            m(2_500, 10_000, 2_500, 1_250),
		"gpt-4o-mini":       m(150, 600, 150, 75),
	}
}

// Validate reports a price that cannot be, naming its model.
func (ps Prices) Validate() error {
	var errs []error
	for _, model := range slices.Sorted(maps.Keys(ps)) {
		if strings.TrimSpace(model) == "" {
			errs = append(errs, errors.New("a price names no model"))
			continue
		}
		if err := ps[model].Validate(); err != nil {
			errs = append(errs, fmt.Errorf("price of %q: %w", model, err))
		}
	}
	return errors.Join(errs...)
}

// With returns ps with over's prices in place of its own for the same keys.
func (ps Prices) With(over Prices) Prices {
	out := maps.Clone(ps)
	if out == nil {
		out = Prices{}
	}
	maps.Copy(out, over)
	return out
}

// Lookup finds the price of model. The name is compared in lower case,
// without a provider prefix ("openai/…", "us.anthropic.…"), Claude Code's
// "[1m]" tag or anything after a key that starts a suffix ("-20250929",
// "@20250929", "-latest") but a short version number: the longest key
// that matches wins, so "gpt-4o-mini" is not priced as "gpt-4o", and
// "claude-sonnet-4-6" is not priced as "claude-sonnet-4". The second result
// is false when no key matches.
func (ps Prices) Lookup(model string) (Price, bool) {
	if p, ok := ps.exact(strings.ReplaceAll(strings.ToLower(strings.TrimSpace(model)), tokens.OneMillionTag, "")); ok {
		return p, true
	}
	name, _ := tokens.ModelName(model)
	best, found := "", false
	for key := range ps {
		k := strings.ToLower(key)
		if len(k) > len(best) && prefixMatches(name, k) {
			best, found = key, true
		}
	}
	if !found {
		return Price{}, false
	}
	return ps[best], true
}

func (ps Prices) exact(name string) (Price, bool) {
	for key, p := range ps {
		if strings.ToLower(key) == name {
			return p, true
		}
	}
	return Price{}, false
}

func prefixMatches(name, key string) bool {
	if key == "" || !strings.HasPrefix(name, key) {
		return false
	}
	if len(name) == len(key) {
		return true
	}
	switch name[len(key)] {
	case '-', '@', ':', '_', '.':
	default:
		return false
	}
	// A short number after the key is a later version ("claude-sonnet-4-6"
	// after "claude-sonnet-4"), which may cost something else; a date
	// ("-20250929") or a word ("-latest") is the same model.
	rest := name[len(key)+1:]
	if i := strings.IndexAny(rest, "-@:_."); i >= 0 {
		rest = rest[:i]
	}
	return len(rest) >= 4 || !digits(rest) || rest == ""
}

// decimalText writes n/10^scale as a decimal without trailing zeros.
func decimalText(n int64, scale int) string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign, u = "-", uint64(-n)
	}
	unit := uint64(math.Pow10(scale))
	whole, frac := u/unit, u%unit
	if frac == 0 {
		return sign + strconv.FormatUint(whole, 10)
	}
	f := strings.TrimRight(fmt.Sprintf("%0*d", scale, frac), "0")
	return sign + strconv.FormatUint(whole, 10) + "." + f
}

// parseDecimal reads a JSON number (or a string holding one) as an integer
// count of 10^-scale units: exact, non-negative, at most limit.
func parseDecimal(b []byte, scale int, limit int64) (int64, error) {
	s := strings.TrimSpace(string(b))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	if s == "" || s == "null" {
		return 0, errors.New("no number")
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("%s is negative", s)
	}
	if strings.ContainsAny(s, "eE") && strings.Trim(s, "0123456789.eE+-") == "" {
		return 0, fmt.Errorf("%s: write it without an exponent", s)
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > scale {
		return 0, fmt.Errorf("%s has more than %d decimals", s, scale)
	}
	unit := int64(math.Pow10(scale))
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > limit/unit {
		return 0, fmt.Errorf("%s is too large", s)
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", scale-len(frac)), 10, 64)
	}
	n := w*unit + f
	if n > limit {
		return 0, fmt.Errorf("%s is too large", s)
	}
	return n, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func mulSaturating(a, b int64) USD {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return USD(math.MaxInt64)
	}
	return USD(a * b)
}

func addSaturating(a, b USD) USD {
	if a > USD(math.MaxInt64)-b {
		return USD(math.MaxInt64)
	}
	return a + b
}
