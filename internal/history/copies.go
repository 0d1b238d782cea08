package history

import (
	"fmt"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// holder is a member known to hold a complete copy of an object from a
// time on: its creator once its Put returned OK (pinned: only a Delete
// frees it), or the caller of a Get once the Get returned the object.
type holder struct {
	member int
	from   time.Time
	pinned bool
}

// index is a history sorted for the rules' questions.
type index struct {
	h        History
	byObject map[string][]*Op // every op that names the object (a Reduce: its target)
	reduces  map[string]*Op   // target -> its Reduce
}

func newIndex(h History) *index {
	x := &index{h: h, byObject: map[string][]*Op{}, reduces: map[string]*Op{}}
	for i := range h.Ops {
		o := &h.Ops[i]
		x.byObject[o.Object] = append(x.byObject[o.Object], o)
		if o.Kind == Reduce {
			x.reduces[o.Object] = o
		}
	}
	return x
}

func ok(o *Op) bool { return o.Code == messages.ErrorCode_OK }

// holders are the members known to have held a complete copy of id.
func (x *index) holders(id string) []holder {
	var out []holder
	for _, o := range x.byObject[id] {
		switch {
		case o.Kind == Put && ok(o):
			out = append(out, holder{member: o.Member, from: o.End, pinned: true})
		case o.Kind == Get && ok(o):
			out = append(out, holder{member: o.Member, from: o.End})
		}
	}
	return out
}

// sizeOf is id's size as the history knows it: its Puts', an OK Get's,
// or its Reduce's target's (0: none of them).
func (x *index) sizeOf(id string) int64 {
	var n int64
	for _, o := range x.byObject[id] {
		if o.Kind == Put || o.Kind == Reduce || o.Kind == Get && ok(o) {
			n = max(n, o.Size)
		}
	}
	return n
}

// gone says how member lost (or was cut off from) its copy of id held
// since from, by time by; "" if it still held it.
func (x *index) gone(hd holder, id string, by time.Time) string {
	for _, e := range x.h.Events {
		if e.Member != hd.member || e.Begin.After(by) {
			continue
		}
		switch e.Kind {
		case Kill, Restart:
			if e.Begin.After(hd.from) || e.End.After(hd.from) {
				return e.String()
			}
		case Pause:
			if e.End.After(hd.from) || e.End.IsZero() {
				return e.String()
			}
		case Evict:
			if e.Object == id && !hd.pinned && e.Begin.After(hd.from) {
				return e.String()
			}
		}
	}
	return ""
}

// killedSince reports a Kill, Restart or Pause of any member from since
// to by, for copies the history cannot name (a Reduce's root).
func (x *index) killedSince(since, by time.Time) string {
	for _, e := range x.h.Events {
		if (e.Kind == Kill || e.Kind == Restart || e.Kind == Pause) && !e.Begin.After(by) && !e.End.Before(since) {
			return e.String()
		}
	}
	return ""
}

// lost says why no complete copy of id that existed before asOf can be
// left by by ("" if one can): every known holder from before asOf died,
// was cut off or evicted it by then, and for a Reduce's target (whose
// root's member the history does not name) some member died after the
// Reduce began. alive lists the holders that were left.
func (x *index) lost(id string, asOf, by time.Time) (why string, alive []string) {
	hs := x.holders(id)
	var gone []string
	for _, hd := range hs {
		if !hd.from.Before(asOf) {
			continue
		}
		if g := x.gone(hd, id, by); g != "" {
			gone = append(gone, g)
		} else {
			alive = append(alive, fmt.Sprintf("member %d (since %s)", hd.member, hd.from.Format("15:04:05.000")))
		}
	}
	if len(alive) > 0 {
		return "", alive
	}
	if r := x.reduces[id]; r != nil {
		k := x.killedSince(r.Begin, by)
		if k == "" {
			return "", []string{"the Reduce's root (no member died since it began)"}
		}
		gone = append(gone, k+" (may have held the root)")
	}
	if len(gone) == 0 {
		// No copy was known to exist: the object's Puts failed, or
		// answered only after asOf. Their creators may hold a copy
		// nonetheless; each must be gone, or its Put not have answered OK.
		for _, o := range x.byObject[id] {
			if o.Kind != Put || o.Begin.After(by) {
				continue
			}
			if g := x.gone(holder{member: o.Member, from: o.Begin, pinned: true}, id, by); g != "" {
				gone = append(gone, g)
			} else if ok(o) {
				return "", []string{fmt.Sprintf("member %d (its creator, from %s)", o.Member, o.End.Format("15:04:05.000"))}
			} else {
				gone = append(gone, fmt.Sprintf("%s answered %v", label(o), o.Code))
			}
		}
		if len(gone) == 0 {
			return "", nil
		}
		return "no copy known: " + strings.Join(gone, "; "), nil
	}
	return "every holder gone: " + strings.Join(gone, "; "), nil
}

// readableFrom is when id first was known readable (a Put or a Reduce
// answered OK, or a Get returned it), and whether it ever was.
func (x *index) readableFrom(id string) (time.Time, bool) {
	var at time.Time
	found := false
	for _, o := range x.byObject[id] {
		if !ok(o) || o.Kind == Delete {
			continue
		}
		if !found || o.End.Before(at) {
			at, found = o.End, true
		}
	}
	return at, found
}

// putBegan reports whether some Put of id (or its Reduce) began before t.
func (x *index) putBegan(id string, t time.Time) bool {
	for _, o := range x.byObject[id] {
		if (o.Kind == Put || o.Kind == Reduce) && o.Begin.Before(t) {
			return true
		}
	}
	return false
}

// deleteBegan is the first Delete of id that began before t, or nil.
func (x *index) deleteBegan(id string, t time.Time) *Op {
	for _, o := range x.byObject[id] {
		if o.Kind == Delete && o.Begin.Before(t) {
			return o
		}
	}
	return nil
}

// otherDeleteBegan is the first Delete of id other than self that began
// before t, or nil.
func (x *index) otherDeleteBegan(id string, t time.Time, self *Op) *Op {
	for _, o := range x.byObject[id] {
		if o.Kind == Delete && o != self && o.Begin.Before(t) {
			return o
		}
	}
	return nil
}

// deleteDone is a Delete of id that answered OK before t, or nil.
func (x *index) deleteDone(id string, t time.Time) *Op {
	for _, o := range x.byObject[id] {
		if o.Kind == Delete && ok(o) && o.End.Before(t) {
			return o
		}
	}
	return nil
}

// gonePast reports whether id is past reading by t: a Delete began, or
// its copies were lost.
func (x *index) gonePast(id string, asOf, by time.Time) string {
	if d := x.deleteBegan(id, by); d != nil {
		return fmt.Sprintf("%s began at %s", label(d), d.Begin.Format("15:04:05.000"))
	}
	if why, _ := x.lost(id, asOf, by); why != "" {
		return why
	}
	return ""
}

func label(o *Op) string {
	if o.Label != "" {
		return o.Label
	}
	return fmt.Sprintf("op %d (%s %s on member %d)", o.ID, o.Kind, o.Object, o.Member)
}
