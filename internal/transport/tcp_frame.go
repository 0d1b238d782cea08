package transport

import (
	"encoding/binary"
	"strconv"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// The TCP data plane's wire format. All integers are big-endian.
//
// A connection carries one stream at a time; the client sends the next
// request only after the previous stream ended (its last data byte or an
// error frame).
//
// Request, client to server (32 bytes, then the id):
//
//	0  [4]byte magic "HPDQ"
//	4  uint16  protocol version (tcpVersion)
//	6  uint16  bits 0–12: id length, at most maxIDLen; bit 15: paced
//	           (reqPaced); bits 13–14: 0
//	8  int64   offset
//	16 uint32  chunk size, TCPConfig.MinChunk..maxChunk
//	20 uint32  keepalive interval in ms the receiver asks for (0: the sender's)
//	24 uint64  the incarnation of the endpoint the request is meant for
//	           (0: whichever serves there)
//	32 []byte  object id
//
// A paced request asks the sender to send the stream through its
// EgressPacer (OpenPaced), at the rate of the sender's own link.
//
// Every Serve is a new incarnation of its endpoint: a random number,
// which the data address it returns carries ("host:port#<16 hex
// digits>"). A request to that address names it, and an endpoint of
// another incarnation at host:port (a process restarted there) answers
// it with an UNAVAILABLE error frame instead of serving it: a fetch, a
// Locate or a push meant for a member that is gone never reaches the
// member that took its port. A plain "host:port" names none.
//
// Response, server to client: a preamble, [4]byte magic "HPDR" and uint16
// protocol version, then frames of {uint8 kind, uint32 length, length bytes}:
//
//	'K' keepalive, length 0: the sender is waiting for its copy to grow
//	'S' length 8, int64 object size: once, before any data
//	'D' 1..min(chunk, bytes left) bytes of the object, in order
//	'E' uint16 ErrorCode + message (at most maxErrMsg bytes): ends the stream
//
// The stream ends after its last data byte (offset reaches size).
// DefaultMinChunk is TCPConfig.MinChunk's default: a frame header per
// 4 KiB of data is under 0.2 % of the bytes, and no member asks for less
// (the smallest chunk a pipeline takes is plan.MinPipelineChunk, 16 KiB).
const DefaultMinChunk = 4 << 10

const (
	// tcpVersion 2 added the paced bit to the request; 3 the incarnation.
	tcpVersion     = 3
	reqHeaderLen   = 32
	preambleLen    = 6
	frameHeaderLen = 5
	// maxIDLen caps object ids on the wire.
	maxIDLen = 4096
	// reqPaced and reqIDLenMask split a request's id-length field.
	reqPaced     = 1 << 15
	reqIDLenMask = 1<<13 - 1
	// maxChunk caps a data frame; Open clamps larger chunk sizes to it.
	maxChunk  = 64 << 20
	maxErrMsg = 1024

	frameKeepalive = 'K'
	frameSize      = 'S'
	frameData      = 'D'
	frameError     = 'E'

	minKeepalive = 10 * time.Millisecond
	maxKeepalive = 10 * time.Minute
)

var (
	reqMagic  = [4]byte{'H', 'P', 'D', 'Q'}
	respMagic = [4]byte{'H', 'P', 'D', 'R'}
)

type tcpRequest struct {
	version   uint16
	idLen     int
	offset    int64
	chunk     uint32
	keepalive time.Duration
	id        string
	paced     bool
	badFlags  bool   // bits 13–14 of the id-length field were set
	inc       uint64 // the endpoint's incarnation it is meant for (0: any)

	// A control request (see encodeControl) instead of a stream.
	control bool
	kind    byte
	timeout time.Duration
	payload []byte
}

// encodeRequest encodes a stream request for incarnation inc.
func encodeRequest(id string, offset int64, chunk int, keepalive time.Duration, paced bool, inc uint64) []byte {
	b := make([]byte, reqHeaderLen+len(id))
	copy(b, reqMagic[:])
	binary.BigEndian.PutUint16(b[4:], tcpVersion)
	idLen := uint16(len(id))
	if paced {
		idLen |= reqPaced
	}
	binary.BigEndian.PutUint16(b[6:], idLen)
	binary.BigEndian.PutUint64(b[8:], uint64(offset))
	binary.BigEndian.PutUint32(b[16:], uint32(chunk))
	binary.BigEndian.PutUint32(b[20:], uint32(min(keepalive.Milliseconds(), 1<<32-1)))
	binary.BigEndian.PutUint64(b[24:], inc)
	copy(b[reqHeaderLen:], id)
	return b
}

// parseRequestHeader decodes the fixed part; the caller checks the magic.
func parseRequestHeader(h *[reqHeaderLen]byte) tcpRequest {
	idField := binary.BigEndian.Uint16(h[6:])
	return tcpRequest{
		version:   binary.BigEndian.Uint16(h[4:]),
		idLen:     int(idField & reqIDLenMask),
		paced:     idField&reqPaced != 0,
		badFlags:  idField&^(reqPaced|reqIDLenMask) != 0,
		offset:    int64(binary.BigEndian.Uint64(h[8:])),
		chunk:     binary.BigEndian.Uint32(h[16:]),
		keepalive: time.Duration(binary.BigEndian.Uint32(h[20:])) * time.Millisecond,
		inc:       binary.BigEndian.Uint64(h[24:]),
	}
}

// splitAddress splits a data address into what to dial and the
// incarnation it names (0 for a plain host:port).
func splitAddress(addr string) (dial string, inc uint64, err error) {
	dial, hexInc, ok := strings.Cut(addr, "#")
	if !ok {
		return addr, 0, nil
	}
	inc, perr := strconv.ParseUint(hexInc, 16, 64)
	if perr != nil || len(hexInc) != 16 || inc == 0 {
		return "", 0, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "data address %q: want host:port#<16 hex digits>", addr)
	}
	return dial, inc, nil
}

// HostPort is the host:port a data address listens at, without the
// incarnation it names: what an operator's firewall or a raw connection
// needs.
func HostPort(addr string) string {
	dial, _, _ := strings.Cut(addr, "#")
	return dial
}

// errOtherIncarnation is what an endpoint answers a request meant for
// another incarnation at its address.
func errOtherIncarnation(addr string, inc uint64) error {
	return messages.Errorf(messages.ErrorCode_UNAVAILABLE,
		"another incarnation serves at %s: the endpoint %016x asked for is gone (its node stopped)", HostPort(addr), inc)
}

func appendPreamble(b []byte) []byte {
	b = append(b, respMagic[:]...)
	return binary.BigEndian.AppendUint16(b, tcpVersion)
}

func appendFrameHeader(b []byte, kind byte, n int) []byte {
	b = append(b, kind)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// errorPayload encodes err for an 'E' frame.
func errorPayload(err error) []byte {
	e := messages.AsError(err)
	code := e.GetCode()
	if code == messages.ErrorCode_OK {
		code = messages.ErrorCode_INTERNAL
	}
	msg := e.GetMessage()
	if len(msg) > maxErrMsg {
		msg = msg[:maxErrMsg]
	}
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(msg)), uint16(code))
	return append(b, msg...)
}

// decodeError turns an 'E' frame's payload into a typed error; ok is false
// for a payload no conforming sender writes.
func decodeError(p []byte, addr string) (err error, ok bool) {
	if len(p) < 2 {
		return nil, false
	}
	code := int32(binary.BigEndian.Uint16(p))
	if _, known := messages.ErrorCode_name[code]; !known || code == int32(messages.ErrorCode_OK) {
		return nil, false
	}
	// Messages may travel on in protobuf replies: keep them valid UTF-8.
	msg := strings.ToValidUTF8(string(p[2:]), "\uFFFD")
	return messages.Errorf(messages.ErrorCode(code), "%s (data peer %s)", msg, addr), true
}

// A control request (see Caller) shares the connections and the response
// format; it differs in its header (32 bytes, then the payload):
//
//	0  [4]byte magic "HPDC"
//	4  uint16  protocol version (tcpVersion)
//	6  uint8   kind, chosen by the Controller's user
//	7  uint8   0
//	8  uint32  payload length, at most MaxControlRequest
//	12 uint32  timeout in ms, 1..maxControlTimeout: the handler's deadline
//	16 [8]byte 0
//	24 uint64  the incarnation of the endpoint it is meant for (0: any)
//	32 []byte  payload
//
// The answer is the preamble, then one frame: 'C' with the reply (at most
// MaxControlReply bytes) or 'E'. While the handler runs the client sends
// nothing; a byte or a close from it means it gave up.
const (
	frameControl      = 'C'
	maxControlTimeout = uint32(time.Hour / time.Millisecond)
)

var ctlMagic = [4]byte{'H', 'P', 'D', 'C'}

func encodeControl(kind byte, req []byte, timeout time.Duration, inc uint64) []byte {
	b := make([]byte, reqHeaderLen+len(req))
	copy(b, ctlMagic[:])
	binary.BigEndian.PutUint16(b[4:], tcpVersion)
	b[6] = kind
	binary.BigEndian.PutUint32(b[8:], uint32(len(req)))
	ms := min(max(timeout.Milliseconds(), 1), int64(maxControlTimeout))
	binary.BigEndian.PutUint32(b[12:], uint32(ms))
	binary.BigEndian.PutUint64(b[24:], inc)
	copy(b[reqHeaderLen:], req)
	return b
}
