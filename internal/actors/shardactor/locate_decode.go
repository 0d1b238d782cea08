package shardactor

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// inlineDataField is LocateReply.inline_data's field number.
const inlineDataField = 6

// decodeLocateReply decodes an encoded LocateReply whose inline_data
// stays where it is: the reply's InlineData is a slice of b, not a copy
// (protobuf-go copies every bytes field it decodes). b is the buffer the
// data plane read the answer into, the caller's alone, so an inline
// object's bytes cross the receiving member once, from the socket into
// b, which the store then keeps as the object's buffer (Writer.Adopt).
// b must not be written afterwards.
//
// Every field but inline_data goes through proto.Unmarshal as usual: the
// runs of fields between inline_data's occurrences are decoded one
// after another, merged, as protobuf decodes a concatenation (the last
// inline_data wins, as it would).
func decodeLocateReply(b []byte) (*messages.LocateReply, error) {
	r := &messages.LocateReply{}
	merge := proto.UnmarshalOptions{Merge: true}
	var inline []byte
	found := false
	from := 0 // start of the run of other fields not decoded yet
	for at := 0; at < len(b); {
		num, typ, n := protowire.ConsumeTag(b[at:])
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[at+n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		if num == inlineDataField && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[at+n:])
			if err := merge.Unmarshal(b[from:at], r); err != nil {
				return nil, err
			}
			inline, found = v, true
			from = at + n + m
		}
		at += n + m
	}
	if err := merge.Unmarshal(b[from:], r); err != nil {
		return nil, err
	}
	if found {
		r.InlineData = inline[:len(inline):len(inline)]
	}
	return r, nil
}
