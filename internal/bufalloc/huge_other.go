//go:build !linux

package bufalloc

// adviseHuge is a no-op where there is no madvise(MADV_HUGEPAGE).
func adviseHuge([]byte) {}
