package storeactor

import (
	"context"
	"io"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// assembleBlock is how much of a segmented Put is copied into the
// object's buffer before it is fingerprinted: small enough to be read
// back from the cache the copy just wrote it to.
const assembleBlock = 256 << 10

// fetchPutSegments is fetchPut for a PutFrom of unknown size (-1): it
// receives the segments of segSize bytes the sender serves
// (storeproto.SegmentName) in order until a shorter one ends the object,
// counting them against the store's capacity as they come, then copies
// them into one buffer of the object's size, fingerprinting each block
// as it lands. The copy is what not knowing the size costs: the buffer
// cannot be made before the last byte. A failed segment (the sender's
// reader failed, or its stream broke) fails the whole: nothing is kept.
func fetchPutSegments(segSize int64) func(ctx context.Context, cfg *Config, id, addr string, _ int64, chunk int) ([]byte, uint64, error) {
	return func(ctx context.Context, cfg *Config, id, addr string, _ int64, chunk int) ([]byte, uint64, error) {
		capacity := cfg.Store.Capacity()
		var segs [][]byte
		var total int64
		for k := int64(0); ; k++ {
			b, err := fetchSegment(ctx, cfg, id, addr, k, segSize, capacity-total, chunk)
			if err != nil {
				return nil, 0, err
			}
			segs = append(segs, b)
			total += int64(len(b))
			if int64(len(b)) < segSize {
				break
			}
		}
		buf := bufalloc.Make(int(total))
		var fp fingerprint.Writer
		off := 0
		for i, s := range segs {
			for len(s) > 0 {
				n := copy(buf[off:], s[:min(len(s), assembleBlock)])
				fp.Write(buf[off : off+n])
				off += n
				s = s[n:]
			}
			segs[i] = nil // the collector may take it while the rest is copied
		}
		return buf, fp.Sum(), nil
	}
}

// fetchSegment receives segment k of a segmented Put, at most segSize
// bytes and at most room, the store's capacity left for the object.
func fetchSegment(ctx context.Context, cfg *Config, id, addr string, k, segSize, room int64, chunk int) ([]byte, error) {
	octx, cancel := context.WithTimeout(ctx, cfg.stall())
	s, err := cfg.Transport.Open(octx, cfg.Self.GetDataAddress(), addr, storeproto.SegmentName(id, k), 0, chunk)
	cancel()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	size := s.Size()
	switch {
	case size > segSize:
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: its sender serves segment %d of %d bytes, more than the %d it named", id, k, size, segSize)
	case size > room:
		return nil, messages.Errorf(messages.ErrorCode_CAPACITY, "object %q exceeds the node capacity of %d bytes (at segment %d, byte %d)", id, cfg.Store.Capacity(), k, k*segSize+room)
	}
	buf := bufalloc.Make(int(size))
	for off := 0; off < len(buf); {
		cctx, cancel := context.WithTimeout(ctx, cfg.stall())
		n, rerr := s.NextInto(cctx, buf[off:])
		cancel()
		if rerr == io.EOF {
			rerr = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "put of %q: the stream of segment %d from its sender ended at %d of %d bytes", id, k, off, size)
		}
		if rerr == nil && ctx.Err() != nil {
			rerr = ctx.Err()
		}
		if rerr != nil {
			return nil, rerr
		}
		off += n
	}
	return buf, nil
}
