package bufalloc

import (
	"runtime/debug"
	"testing"
)

// BenchmarkFirstTouch32MiB writes every page of a new 32 MiB buffer made
// by Make, on 4 KiB pages and on huge pages, each from memory the Go heap
// has just given back to the kernel (debug.FreeOSMemory, outside the
// timer): what a receiver's fresh buffer costs the machine the benchmark
// runs on, the two side by side. The ratio is what ChoosePages measures
// at a member's warm-up.
func BenchmarkFirstTouch32MiB(b *testing.B) {
	const n = 32 << 20
	defer SetPages(PagesUnchosen)
	for _, p := range []Pages{PagesSmall, PagesHuge} {
		b.Run(p.String(), func(b *testing.B) {
			SetPages(p)
			b.SetBytes(n)
			for b.Loop() {
				b.StopTimer()
				debug.FreeOSMemory()
				b.StartTimer()
				buf := Make(n)
				for i := 0; i < n; i += 4096 {
					buf[i] = 1
				}
			}
		})
	}
}
