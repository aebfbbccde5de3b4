package natsembed

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSyncReachesJetStream: the fsync setting is the embedded JetStream's.
func TestSyncReachesJetStream(t *testing.T) {
	t.Parallel()
	for _, opts := range []Options{{SyncAlways: true}, {SyncInterval: 10 * time.Second}} {
		s, err := Start(opts)
		require.NoError(t, err)
		cfg := s.ns.JetStreamConfig()
		s.Shutdown()
		require.NotNil(t, cfg)
		require.Equal(t, opts.SyncAlways, cfg.SyncAlways)
		if opts.SyncInterval > 0 {
			require.Equal(t, opts.SyncInterval, cfg.SyncInterval)
		}
	}
}
