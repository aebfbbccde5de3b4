package accounting

import "slices"

// Thrashing is the thrash guard: a session whose latest automatic
// compactions were asked by the turns seqs (oldest first) asks for no more
// at turn seq while max of them fall within its last turns turns; max 0
// turns the guard off. Compactions that leave a session above the
// threshold would otherwise follow one another on every turn.
func Thrashing(seqs []int64, seq int64, max, turns int) bool {
	if max <= 0 {
		return false
	}
	within := 0
	for _, s := range seqs {
		if seq-s < int64(turns) {
			within++
		}
	}
	return within >= max
}

// RecentCompactions is seqs with seq added, keeping the latest keep.
func RecentCompactions(seqs []int64, seq int64, keep int) []int64 {
	out := append(slices.Clone(seqs), seq)
	return out[max(len(out)-max(keep, 1), 0):]
}
