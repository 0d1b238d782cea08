//go:build !linux

package bufalloc

import (
	"errors"
	"time"
)

// hugePage is the alignment makeHuge keeps (it is never chosen here).
const hugePage = 2 << 20

func alignOffset([]byte) int { return 0 }

// adviseHuge is a no-op where there is no madvise(MADV_HUGEPAGE).
func adviseHuge([]byte) {}

func measureFirstTouch(n, rounds int) (small, huge time.Duration, err error) {
	return 0, 0, errors.New("transparent huge pages are Linux's")
}
