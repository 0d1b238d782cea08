//go:build !linux

package bufalloc

import (
	"errors"
	"time"
)

// adviseHuge is a no-op where there is no madvise(MADV_HUGEPAGE).
func adviseHuge([]byte) {}

func measureFirstTouch(n, rounds int) (small, huge time.Duration, err error) {
	return 0, 0, errors.New("transparent huge pages are Linux's")
}
