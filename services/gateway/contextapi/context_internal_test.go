package contextapi

import (
	"math/rand/v2"
	"testing"

	"github.com/minio/highwayhash"
	"github.com/stretchr/testify/require"
)

// TestHashPartsIsTheHashOfTheJoinedParts: the sum, the length and the
// head's sum of parts are those of the joined bytes and of their first cut
// bytes, at every cut (a part's start, its middle, its end, an empty part),
// there is no head past the end, and the hashing pauses once every
// pageWrite parts.
func TestHashPartsIsTheHashOfTheJoinedParts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	part := func() []byte {
		p := make([]byte, r.IntN(5)) // some empty
		for i := range p {
			p[i] = byte(r.IntN(256))
		}
		return p
	}
	paced := 0
	for range 50 {
		var system, messages [][]byte
		for range r.IntN(4) {
			system = append(system, part())
		}
		for range r.IntN(6) {
			messages = append(messages, part())
		}
		if r.IntN(5) == 0 { // a long session: the hashing pauses every pageWrite parts
			for range pageWrite*2 + r.IntN(pageWrite) {
				messages = append(messages, part())
			}
		}
		var joined []byte
		for _, p := range append(append([][]byte{}, system...), messages...) {
			joined = append(joined, p...)
		}
		whole := highwayhash.Sum128(joined, prefixHashKey)
		if len(system)+len(messages) >= pageWrite {
			paced++
		}
		for cut := int64(-1); cut <= int64(len(joined))+1; cut++ {
			pauses := 0
			sum, length, head := hashParts(func() { pauses++ }, cut, system, messages)
			require.Equal(t, whole[:], sum)
			require.EqualValues(t, len(joined), length)
			require.Equal(t, (len(system)+len(messages))/pageWrite, pauses)
			switch {
			case cut < 0 || cut > int64(len(joined)):
				require.Nil(t, head, "cut %d of %d bytes", cut, len(joined))
			default:
				want := highwayhash.Sum128(joined[:cut], prefixHashKey)
				require.Equal(t, want[:], head, "cut %d of %d bytes", cut, len(joined))
			}
		}
	}
	require.Positive(t, paced, "some cases were long enough to pause")
}
