package client

import (
	"net/url"
	"strconv"
)

// ListOptions pages a listing: Limit (0: the server's default) items from
// Cursor ("" for the first page), with the listing's filters (sessions:
// state, updated_after, agent, scope; scopes: kind, prefix).
type ListOptions struct {
	Limit   int
	Cursor  string
	Filters map[string]string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	for k, v := range o.Filters {
		q.Set(k, v)
	}
	return q
}
