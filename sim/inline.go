package sim

import (
	"encoding/binary"

	"github.com/hoplite-go/hoplite/internal/objstore"
)

// InlineLimit is the size below which an object lives in its directory
// shard, as the cluster keeps it (cluster.MemberConfig's default
// InlineLimit): a Put hands the shard its bytes, and a Get's
// Locate is answered with them, no stream, while the shard's uplink is
// not their bottleneck (directory.AnswerWithBytes; past it, with a copy
// that holds them). Inline objects are the only ones whose bytes the
// simulator holds (at most this many per copy).
const InlineLimit = 64 << 10

// inlineBytes is the content of an inline object whose checksum is sum:
// sum's eight bytes, repeated to size.
func inlineBytes(sum uint64, size int64) []byte {
	b := make([]byte, size)
	var word [8]byte
	binary.LittleEndian.PutUint64(word[:], sum)
	for i := range b {
		b[i] = word[i%8]
	}
	return b
}

// inlineSum is the checksum of o, a copy an inline Get stored: its
// fingerprint if its bytes are that checksum's content, else a value
// no creator's checksum is (so the invariants see wrong bytes).
func inlineSum(o *objstore.Object) (uint64, bool) {
	b, ok := o.WholeBytes()
	if !ok {
		return 0, false
	}
	fp := o.Fingerprint()
	if string(b) != string(inlineBytes(fp, int64(len(b)))) {
		return ^fp, true
	}
	return fp, true
}

// sendBytes carries a control message with n bytes of payload (an
// inline object's bytes in a Locate's answer) from one host to
// another's queue q: once the sender's CPU sent it (the plane's
// per-message CPU), after the plane's latency less L, the bytes cross
// the sender's uplink and the receiver's downlink as a stream does,
// sharing them with the other streams and taking the shaper's tokens,
// land L after they left, cost the receiver's CPU ByteCost a byte and
// the plane's per-message CPU, and then the message waits for q. On one host there is no network. A
// message whose sender or receiver dies on the way is lost.
func (w *world) sendBytes(from, to *host, q queue, via plane, n int64, fn func()) {
	if from == to || n <= 0 {
		w.send(from, to, q, via, fn)
		return
	}
	w.msgs++
	lat, cpu := w.p.plane(via)
	depart := func() {
		payload := &objState{h: from, id: "message", size: n, written: n, complete: true}
		w.openStreamAfter(max(0, lat-w.p.Latency), payload, to, 0, n,
			func(int64, bool) error { return nil },
			func(err error) {
				if err == nil {
					w.work(to, q, w.cost(q)+cpu, fn)
				}
			})
	}
	if cpu <= 0 {
		depart()
		return
	}
	w.work(from, qSend, cpu, depart)
}
