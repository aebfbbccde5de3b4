package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/search"
)

// searchLimit is how many hits a scope page's search shows.
const searchLimit = 20

// sourceChoice is one source the search box offers (?source=).
type sourceChoice struct {
	Value, Label string
}

// searchSources are the search box's sources; the first (both) is the
// default.
var searchSources = []sourceChoice{
	{"", "Memories and messages"},
	{string(search.SourceMemory), "Memories"},
	{string(search.SourceMessage), "Messages"},
}

// scopeSearch is a scope page's search box and what it found.
type scopeSearch struct {
	Query   string
	Source  string
	Sources []sourceChoice
	// Ran is true when the query was searched (a query was given and
	// taken): the page then lists Hits, or says that none matched.
	Ran     bool
	Problem string // why the query was refused
	Hits    []searchHit
}

// searchHit is a hit as the page lists it.
type searchHit struct {
	search.Hit
	Rank int
	// Link is the memory's page, or the session's at the message.
	Link    string
	Snippet []snippetPart
}

// snippetPart is a run of a snippet's text, Mark when it is a word the
// query matched. The template escapes each part's text: the marks are
// found in the snippet as text, so nothing the stored text or the query
// holds can open an element.
type snippetPart struct {
	Text string
	Mark bool
}

// The marks pkg/search puts around the query's words in a snippet.
const (
	markOpen  = "«"
	markClose = "»"
)

// markedSnippet splits a snippet at its marks. A mark left open, or a
// close with no open before it, stays as text.
func markedSnippet(snippet string) []snippetPart {
	var parts []snippetPart
	add := func(text string, mark bool) {
		if text != "" {
			parts = append(parts, snippetPart{Text: text, Mark: mark})
		}
	}
	rest := snippet
	for rest != "" {
		open := strings.Index(rest, markOpen)
		if open < 0 {
			add(rest, false)
			break
		}
		inner := rest[open+len(markOpen):]
		end := strings.Index(inner, markClose)
		if end < 0 {
			add(rest, false)
			break
		}
		add(rest[:open], false)
		add(inner[:end], true)
		rest = inner[end+len(markClose):]
	}
	return parts
}

// searchScope runs the search box's query (?q=, ?source=) over scope
// through the searcher the API's GET /v1/scopes/{scope}/search uses, in
// the signed-in tenant's transactions. An empty query searches nothing; a
// refused one comes back as the box's Problem, anything else as err.
func (c *Console) searchScope(ctx context.Context, r *http.Request, tenant string, scope memory.Scope) (scopeSearch, error) {
	q := r.URL.Query()
	d := scopeSearch{Query: q.Get("q"), Source: q.Get("source"), Sources: searchSources}
	if d.Source == "all" {
		d.Source = ""
	}
	if strings.TrimSpace(d.Query) == "" {
		return d, nil
	}
	res, err := c.cfg.Search.Search(ctx, search.Request{Tenant: tenant, Scope: scope, Query: d.Query,
		Source: search.Source(d.Source), Limit: searchLimit, Caller: search.CallerConsole})
	var bad *search.InputError
	if errors.As(err, &bad) {
		d.Problem = "Not searched: " + bad.Detail + "."
		return d, nil
	}
	if err != nil {
		return d, err
	}
	d.Ran = true
	for i, h := range res.Hits {
		hit := searchHit{Hit: h, Rank: i + 1, Snippet: markedSnippet(h.Snippet)}
		if h.Source == search.SourceMemory {
			hit.Link = Prefix + "memories/" + url.PathEscape(scope.String()) + "/" + url.PathEscape(h.Memory)
		} else {
			hit.Link = Prefix + "sessions/" + url.PathEscape(h.Session) + "#" + messageAnchor(h.Position)
		}
		d.Hits = append(d.Hits, hit)
	}
	return d, nil
}

// messageAnchor is the id of a stored message's row on its session's page.
func messageAnchor(position int64) string {
	return "m" + strconv.FormatInt(position, 10)
}
