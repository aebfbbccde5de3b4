package searcheval

// Depth is how many hits each question asks for: recall is read at 5 and
// at Depth, and the reciprocal rank counts a first evidence turn within it.
const Depth = 10

// Ranks is, for each evidence turn of a question, its rank among the hits
// (1 for the first), or 0 when it is not among them. hits are the turn ids
// of the hits in order; a hit that is no turn (a memory) is "".
func Ranks(evidence, hits []string) []int {
	out := make([]int, len(evidence))
	for i, e := range evidence {
		for j, h := range hits {
			if h == e {
				out[i] = j + 1
				break
			}
		}
	}
	return out
}

// Scores are a system's figures over a set of questions.
type Scores struct {
	// AnyAt5 and AnyAt10 are the share of questions with at least one
	// evidence turn among the first 5 and 10 hits; AllAt5 and AllAt10 the
	// share with every evidence turn there.
	AnyAt5  float64 `json:"any_at_5"`
	AnyAt10 float64 `json:"any_at_10"`
	AllAt5  float64 `json:"all_at_5"`
	AllAt10 float64 `json:"all_at_10"`
	// MRR is the mean over questions of 1/rank of the first evidence turn
	// among the hits, 0 for a question with none among them.
	MRR float64 `json:"mrr"`
	// Questions is how many questions the figures are over.
	Questions int `json:"questions"`
}

// Score computes Scores from each question's evidence ranks (see Ranks).
func Score(ranks [][]int) Scores {
	s := Scores{Questions: len(ranks)}
	if len(ranks) == 0 {
		return s
	}
	for _, r := range ranks {
		first := firstRank(r)
		if first > 0 {
			s.MRR += 1 / float64(first)
		}
		s.AnyAt5 += hit(first > 0 && first <= 5)
		s.AnyAt10 += hit(first > 0 && first <= 10)
		s.AllAt5 += hit(allWithin(r, 5))
		s.AllAt10 += hit(allWithin(r, 10))
	}
	n := float64(len(ranks))
	s.AnyAt5, s.AnyAt10, s.AllAt5, s.AllAt10, s.MRR = s.AnyAt5/n, s.AnyAt10/n, s.AllAt5/n, s.AllAt10/n, s.MRR/n
	return s
}

func hit(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// firstRank is the best rank among ranks, 0 when none was found.
func firstRank(ranks []int) int {
	best := 0
	for _, r := range ranks {
		if r > 0 && (best == 0 || r < best) {
			best = r
		}
	}
	return best
}

// allWithin reports whether every rank is found and at most k; a question
// without evidence never is.
func allWithin(ranks []int, k int) bool {
	if len(ranks) == 0 {
		return false
	}
	for _, r := range ranks {
		if r == 0 || r > k {
			return false
		}
	}
	return true
}
