package api_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
)

func TestYAMLToJSONKeepsOrderAndTypes(t *testing.T) {
	t.Parallel()
	got, err := api.YAMLToJSON([]byte("b: 1\na:\n  - \"200\"\n  - 2.5\n  - true\n  - null\n  - <x> & \"y\"\nc: {d: e}\n"))
	require.NoError(t, err)
	require.Equal(t, `{"b":1,"a":["200",2.5,true,null,"<x> & \"y\""],"c":{"d":"e"}}`+"\n", string(got))
	for _, bad := range []string{"a: 1\na: 2\n", "a: &x 1\nb: *x\n", "? [a]\n: 1\n", "a: [\n"} {
		_, err := api.YAMLToJSON([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestTheDocumentIsOpenAPI31(t *testing.T) {
	t.Parallel()
	raw, err := api.OpenAPIJSON()
	require.NoError(t, err)
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.NotEmpty(t, doc.Paths)
}
