//go:build !bench

package main

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestABinaryWithoutTheBenchSaysHowToGetOne: the product's binary does not
// link the bench's scripted upstream; its bench command names the tag.
func TestABinaryWithoutTheBenchSaysHowToGetOne(t *testing.T) {
	require.ErrorIs(t, runBench(context.Background(), []string{"--only", "proxy"}, io.Discard, io.Discard), errNoBench)
	require.NoError(t, runBench(context.Background(), []string{"--help"}, io.Discard, io.Discard))
}
