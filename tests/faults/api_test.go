package faults_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
)

// call makes one request of the tenant to a process's API and returns the
// status and the body (0 and the error's text when no answer came). It
// may be called from any goroutine.
func call(api *proctest.Process, method, path, body string) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, api.URL()+path, strings.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, []byte(err.Error())
	}
	return resp.StatusCode, raw
}

// seedMemory saves a memory through the API.
type seedMemory struct{ name, typ, description, body string }

func (m seedMemory) markdown() string {
	return "---\nname: " + m.name + "\ndescription: " + m.description + "\ntype: " + m.typ + "\n---\n\n" + m.body + "\n"
}

func putMemories(t *testing.T, api *proctest.Process, scope string, ms []seedMemory) {
	t.Helper()
	for _, m := range ms {
		status, raw := call(api, http.MethodPut, "/v1/scopes/"+scope+"/memories/"+m.name, m.markdown())
		require.Equal(t, http.StatusCreated, status, string(raw))
	}
}
