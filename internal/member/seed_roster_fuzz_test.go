package member

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo"

	"github.com/hoplite-go/hoplite/internal/memberwatch"
)

// FuzzRosterAnswer hands any body to decodeRoster, as a peer's roster
// answer: never a panic; what it takes is this cluster's, bounded, and
// every member in it has an id, a port in range and a valid endpoint;
// merged into a roster, it never lists the roster's own member.
func FuzzRosterAnswer(f *testing.F) {
	f.Add([]byte(`{"cluster":"seedtest","members":[{"id":"a","address":"127.0.0.1","port":7000,"auto_manage_port":8000,"cluster_name":"seedtest","host":"127.0.0.1:8000"}],"dead":["b"]}`))
	f.Add([]byte(`{"cluster":"seedtest","members":[{"id":"","port":0,"host":"x"},{"id":"self","port":1,"cluster_name":"seedtest","host":"h:1"}],"dead":["self",""]}`))
	f.Add([]byte(`{"cluster":"other","members":[]}`))
	f.Add([]byte(`{"cluster":"seedtest","members":null,"dead":null}`))
	f.Add([]byte(`{"cluster":"seedtest","members":[{"id":"a","port":99999,"cluster_name":"seedtest","host":"127.0.0.1:1"}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		live, dead, err := decodeRoster(body, seedTestCluster)
		if err != nil {
			if live != nil || dead != nil {
				t.Fatalf("an error (%v) with entries", err)
			}
			return
		}
		if len(live) > maxRosterMembers || len(dead) > maxRosterDead {
			t.Fatalf("%d live, %d dead: past the bounds", len(live), len(dead))
		}
		for _, e := range live {
			if e.ID == "" || e.Info.Port <= 0 || e.Info.Port > 65535 || e.Info.ClusterName != seedTestCluster || validSeed(e.Host) != nil {
				t.Fatalf("took a member that is not one: %+v", e)
			}
		}
		p := fuzzProvider(t)
		p.self.Store(&seedNode{ID: "self", Address: "127.0.0.1", Port: 1, ClusterName: seedTestCluster})
		p.mu.Lock()
		p.mon.Start("", "self")
		p.mon.Step(time.Unix(0, 0), memberwatch.Merge[seedNode]{Live: live, Dead: dead})
		p.mu.Unlock()
		for _, m := range p.topology() {
			if m.Id == "self" && m.Port != 1 {
				t.Fatalf("a peer's roster changed this member's own entry: %+v", m)
			}
		}
	})
}

// FuzzRosterPull posts any body to the roster endpoint (the real
// handler): never a panic nor a 5xx; a body that is not a pull is a
// 400, another cluster's a 409; what it learns is valid and bounded.
func FuzzRosterPull(f *testing.F) {
	f.Add([]byte(`{"cluster":"seedtest","host":"127.0.0.1:7946"}`))
	f.Add([]byte(`{"cluster":"seedtest","host":"a b:1"}`))
	f.Add([]byte(`{"cluster":"other","host":"127.0.0.1:1"}`))
	f.Add([]byte(`{"cluster":"seedtest"}`))
	f.Add([]byte(`{"cluster":"seedtest","host":1}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		p := fuzzProvider(t, "127.0.0.1:1")
		e := echo.New()
		p.serveRoster(e)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, rosterPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		e.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if rec.Code == http.StatusOK {
			if _, _, err := decodeRoster(rec.Body.Bytes(), seedTestCluster); err != nil {
				t.Fatalf("this member's own roster does not decode: %v", err)
			}
		}
		checkLearned(t, p, 1)
	})
}
