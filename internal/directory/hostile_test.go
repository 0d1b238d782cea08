package directory

import (
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// A copy's report with a negative size comes from no store node (a
// broken or hostile peer): the table learns nothing from it. Learned,
// the size went to every receiver to allocate and to subscribers, and a
// real Put of the id was refused as a conflict.
func TestNegativeSizeReportsAreNotLearned(t *testing.T) {
	for name, report := range map[string]func(tb *LocationTable){
		"PublishLocation": func(tb *LocationTable) {
			tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_COMPLETE, Size: -1})
		},
		"FetchDone": func(tb *LocationTable) {
			tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(0), Sender: node(0), Size: -1})
		},
	} {
		tb := NewLocationTable(TableConfig{})
		report(tb)
		info := tb.onQuery(&messages.QueryObject{ObjectId: "x"}, replyTo("q"), t0).Sends[0].Msg.(*messages.ObjectInfo)
		if info.GetError().GetCode() != messages.ErrorCode_NOT_FOUND {
			t.Fatalf("%s: the table learned %v", name, info)
		}
		create(t, tb, "x", 8, 1) // fails the test if refused
	}
}

// A FetchDone naming an id no object can have (empty, or longer than the
// limit) makes no entry.
func TestFetchDoneOfAnInvalidIDMakesNoEntry(t *testing.T) {
	tb := NewLocationTable(TableConfig{MaxObjectIDLen: 16})
	for _, id := range []string{"", strings.Repeat("x", 17)} {
		tb.onFetchDone(&messages.FetchDone{ObjectId: id, Receiver: node(0), Sender: node(1), Size: 8})
	}
	if n := tb.Len(); n != 0 {
		t.Fatalf("%d entries after FetchDones of invalid ids", n)
	}
}
