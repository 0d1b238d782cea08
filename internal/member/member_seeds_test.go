package member

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/memberview"
	"github.com/hoplite-go/hoplite/messages"
)

// viewOf is a member's live view (sorted ids).
func viewOf(m *Member) []string {
	var out []string
	for _, n := range m.Members() {
		out = append(out, n.GetNodeId())
	}
	return out
}

func memberIDs(ms ...*Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID())
	}
	slices.Sort(out)
	return out
}

// waitSameView waits until every member's view is exactly ms.
func waitSameView(t *testing.T, ms ...*Member) {
	t.Helper()
	want := memberIDs(ms...)
	eventually(t, 20*time.Second, "every member sees ["+strings.Join(want, " ")+"]", func() bool {
		for _, m := range ms {
			if !slices.Equal(viewOf(m), want) {
				return false
			}
		}
		return true
	})
}

// TestJoinExampleSeeds is README's Join example: three members that list
// each other, and a fourth whose seeds are one member and itself. The
// seed exchange makes all four see the same four members (without it the
// fourth saw two and the others three).
func TestJoinExampleSeeds(t *testing.T) {
	log := testLogger(t, logrus.InfoLevel)
	slots, seeds := memberSlots(t, 4)
	var ms []*Member
	for _, s := range slots[:3] {
		m, err := joinSlot(t, s, seeds[:3], log, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	d, err := joinSlot(t, slots[3], []string{seeds[0], seeds[3]}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ms = append(ms, d)
	waitSameView(t, ms...)
}

// TestJoinExampleSeedsTLS: the same over mutual TLS (the seed exchange
// presents the member's certificate to the manage port).
func TestJoinExampleSeedsTLS(t *testing.T) {
	ca, cert, key, err := GenerateCerts(filepath.Join(t.TempDir(), "cluster"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	withTLS := func(c *MemberConfig) { c.TLSCert, c.TLSKey, c.TLSCA = cert, key, ca }
	log := testLogger(t, logrus.InfoLevel)
	slots, seeds := memberSlots(t, 3)
	a, err := joinSlot(t, slots[0], seeds[:2], log, withTLS)
	if err != nil {
		t.Fatal(err)
	}
	b, err := joinSlot(t, slots[1], seeds[:2], log, withTLS)
	if err != nil {
		t.Fatal(err)
	}
	c, err := joinSlot(t, slots[2], []string{seeds[0], seeds[2]}, log, withTLS)
	if err != nil {
		t.Fatal(err)
	}
	waitSameView(t, a, b, c)
}

// TestViewsDisagreeLogged: without the seed exchange, README's Join
// example leaves the fourth member with a view the others do not share;
// it says so at warn, naming the peer and the members each side lacks.
func TestViewsDisagreeLogged(t *testing.T) {
	// Mostly waiting on other processes: it runs beside the other such tests.
	t.Parallel()
	log := logrus.New()
	log.SetLevel(logrus.InfoLevel)
	log.SetOutput(&syncBuffer{})
	hook := logtest.NewLocal(log)
	slots, seeds := memberSlots(t, 4)
	off := func(c *MemberConfig) { c.noSeedExchange = true }
	var ms []*Member
	for _, s := range slots[:3] {
		m, err := joinSlot(t, s, seeds[:3], log, off)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	d, err := joinSlot(t, slots[3], []string{seeds[0], seeds[3]}, log, off)
	if err != nil {
		t.Fatal(err)
	}
	a := ms[0]
	var others []string // the members d does not see
	for _, m := range ms[1:] {
		others = append(others, m.ID())
	}
	slices.Sort(others)
	eventually(t, 20*time.Second, d.ID()+" warns that its view and "+a.ID()+"'s disagree", func() bool {
		for _, e := range hook.AllEntries() {
			if e.Level != logrus.WarnLevel || e.Data["member"] != d.ID() || e.Data["peer"] != a.ID() ||
				!strings.HasPrefix(e.Message, "membership views disagree") {
				continue
			}
			here, _ := e.Data["missing_here"].([]string)
			there, _ := e.Data["missing_there"].([]string)
			return slices.Equal(here, others) && slices.Equal(there, []string{d.ID()})
		}
		return false
	})
	// The members that agree say nothing of the kind.
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && e.Data["member"] != d.ID() && e.Data["peer"] != d.ID() &&
			strings.HasPrefix(e.Message, "membership views disagree") {
			t.Fatalf("%v warned: %s %v", e.Data["member"], e.Message, e.Data)
		}
	}
}

// TestViewComparedByDigest: a member asked to compare views with a
// digest its own view matches answers without its view (the idle
// comparison's cost does not grow with the cluster); any other digest,
// or none, gets the whole view.
func TestViewComparedByDigest(t *testing.T) {
	t.Parallel()
	log := testLogger(t, logrus.InfoLevel)
	slots, seeds := memberSlots(t, 3)
	var ms []*Member
	for _, s := range slots {
		m, err := joinSlot(t, s, seeds, log, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	waitSameView(t, ms...)
	a, b := ms[0], ms[1]
	view := viewOf(b)
	ask := func(digest uint64) *messages.MemberHelloReply {
		t.Helper()
		ctx := deadline(t, 10*time.Second)
		res, err := actorutil.Request(ctx, a.System().Root, memberPID(b.Node().GetAddress(), RootOf(b.Node()), membersName),
			&messages.MemberHello{ProtocolVersion: ProtocolVersion, Shards: int32(b.cfg.Shards), ToMemberId: b.ID(), ViewDigest: digest})
		if err != nil {
			t.Fatal(err)
		}
		r, ok := res.(*messages.MemberHelloReply)
		if !ok || r.GetMemberId() != b.ID() {
			t.Fatalf("reply %T %v", res, res)
		}
		return r
	}
	if r := ask(memberview.Digest(view)); !r.GetViewSame() || len(r.GetView()) != 0 || len(r.GetViewAddresses()) != 0 || len(r.GetViewStores()) != 0 {
		t.Fatalf("same digest: view_same %v, view %v, %d addresses, %d stores", r.GetViewSame(), r.GetView(), len(r.GetViewAddresses()), len(r.GetViewStores()))
	}
	for _, d := range []uint64{0, memberview.Digest(view[:2])} {
		r := ask(d)
		if r.GetViewSame() || !slices.Equal(r.GetView(), view) || len(r.GetViewAddresses()) != len(view) || len(r.GetViewStores()) != len(view) {
			t.Fatalf("digest %x: view_same %v, view %v (want %v), %d addresses, %d stores", d, r.GetViewSame(), r.GetView(), view, len(r.GetViewAddresses()), len(r.GetViewStores()))
		}
	}
}

func TestViewDiff(t *testing.T) {
	for _, c := range []struct{ mine, theirs, here, there []string }{
		{[]string{"a", "b"}, []string{"a", "b"}, nil, nil},
		{[]string{"a", "d"}, []string{"a", "b", "c"}, []string{"b", "c"}, []string{"d"}},
		{nil, []string{"a"}, []string{"a"}, nil},
	} {
		here, there := viewDiff(c.mine, c.theirs)
		if !slices.Equal(here, c.here) || !slices.Equal(there, c.there) {
			t.Errorf("viewDiff(%v, %v) = %v, %v; want %v, %v", c.mine, c.theirs, here, there, c.here, c.there)
		}
	}
}
