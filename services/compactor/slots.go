package compactor

import (
	"context"
	"runtime"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// A compaction's own work (reading every message of the session, a summary
// made in process by the builtin provider, the checks of a summary) takes a
// core while it runs. When a hundred sessions cross their threshold within
// a second, Workers compactions at once take both cores of a small machine
// while the turns being accounted beside them wait: on two cores the
// ingest benchmark's sustained p99 is 25-30 ms with the slots and 60-300 ms
// without. So a compaction works holding one of the process's compaction
// slots, half its cores; it gives the slot back while it waits for a
// model's answer, which costs the process nothing.

// defaultSlots is half the cores the process may use, at least one.
func defaultSlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// slot is a compaction's hold on one of the slots.
type slot struct {
	slots    cpu.Heavy
	progress func() error
	release  func() // nil while not held
}

type slotKey struct{}

// holdSlot waits for a slot, calling progress while it waits, and returns
// ctx carrying the hold and the function that ends it.
func holdSlot(ctx context.Context, slots cpu.Heavy, progress func() error) (context.Context, func(), error) {
	h := &slot{slots: slots, progress: progress}
	if err := h.take(ctx); err != nil {
		return ctx, nil, err
	}
	return context.WithValue(ctx, slotKey{}, h), h.give, nil
}

func (h *slot) take(ctx context.Context) error {
	release, err := h.slots.Hold(ctx, time.Second, h.progress)
	if err != nil {
		return err
	}
	h.release = release
	return nil
}

func (h *slot) give() {
	if h.release != nil {
		h.release()
		h.release = nil
	}
}

// awayFromSlot is a model reached over the network: while a call waits for
// its answer, the compaction's slot goes to another compaction.
type awayFromSlot struct{ llm.Provider }

func (p awayFromSlot) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	h, ok := ctx.Value(slotKey{}).(*slot)
	if !ok || h.release == nil {
		return p.Provider.Complete(ctx, req)
	}
	h.give()
	resp, err := p.Provider.Complete(ctx, req)
	if terr := h.take(ctx); terr != nil && err == nil {
		err = terr
	}
	return resp, err
}

// model is the provider a compaction calls: the builtin one summarizes in
// this process and keeps the slot; any other gives it back while it waits.
func model(p llm.Provider) llm.Provider {
	if p.Name() == "builtin" {
		return p
	}
	return awayFromSlot{p}
}
