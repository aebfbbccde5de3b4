package contextapi

import (
	"strconv"

	"github.com/mnemos-ai/mnemos/pkg/immutable"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// The context reads' immutable caches keep what a read decided for good,
// after its transaction commits, so the next read of the session does not
// read it again: the frozen memory section of a session's compaction, and
// what is shown beside each user message (recall's decision); their keys
// name the session's incarnation (its creation time), so a session deleted
// and made again under the same id starts over. Each gateway replica keeps
// its own; one that has not learnt a value reads it again.

// immutablesMax bounds each of the gateway's immutable caches.
const immutablesMax = 100_000

// incarnation names a session as created: its tenant, id and creation time.
func incarnation(s sessionstate.Session) string {
	return s.TenantID + "\x00" + s.SessionID + "\x00" + strconv.FormatInt(s.CreatedAt.UnixNano(), 36)
}

// knownDecisions is recall.Known for one context read: it answers from the
// gateway's cache and holds what the read learns until its transaction
// has committed (keep).
type knownDecisions struct {
	cache   *immutable.Cache[store.RecallPrefetch]
	session string
	learnt  map[string]store.RecallPrefetch
}

func (k *knownDecisions) Decision(uuid string) (store.RecallPrefetch, bool) {
	return k.cache.Get(k.session + "\x00" + uuid)
}

func (k *knownDecisions) Remember(uuid string, d store.RecallPrefetch) {
	if k.learnt == nil {
		k.learnt = map[string]store.RecallPrefetch{}
	}
	k.learnt[uuid] = d
}

// keep puts what the read learnt in the cache, once its transaction has
// committed.
func (k *knownDecisions) keep() {
	for uuid, d := range k.learnt {
		k.cache.Put(k.session+"\x00"+uuid, d)
	}
}
