package actorutil

import (
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

func TestTypeName(t *testing.T) {
	if got := TypeName(&messages.Put{}); got != "hoplite.Put" {
		t.Errorf("TypeName(Put) = %q", got)
	}
	if got := TypeName(struct{ x int }{}); got != "struct { x int }" {
		t.Errorf("TypeName(struct) = %q", got)
	}
}
