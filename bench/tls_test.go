package bench

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/internal/experiments"
)

// --tls adds ours-tls right after ours; its nodes, and only its, start
// with the run's certificates.
func TestTestbedNodeArgsTLS(t *testing.T) {
	o, err := (&Options{Scenario: "broadcast", Nodes: 2, Peers: []string{"naive"}, TLS: true, Testbed: &Testbed{}}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range o.systems() {
		names = append(names, s.name)
	}
	if !slices.Equal(names, []string{SysOurs, SysOursTLS, SysNaive}) {
		t.Errorf("systems %v", names)
	}
	files := certs.Files{CA: "/logs/tls/ca.pem", Cert: "/logs/tls/member.pem", Key: "/logs/tls/member-key.pem"}
	tb := &testbedRun{o: o, tb: &Testbed{Namespaces: []string{"x-h0", "x-h1"}, Binary: "/bin/hoplite"}, certs: files}
	const tlsArgs = " -tls-cert /logs/tls/member.pem -tls-key /logs/tls/member-key.pem -tls-ca /logs/tls/ca.pem"
	for _, s := range o.systems() {
		args := strings.Join(tb.nodeArgs(1, s, "198.18.77.2:20000", 30000, []string{"198.18.77.1:30000"}), " ")
		if !strings.Contains(args, " /bin/hoplite node -bind 198.18.77.2:20000 ") || !strings.HasPrefix(args, "netns exec x-h1 ") {
			t.Errorf("%s: %s", s.name, args)
		}
		if got := strings.HasSuffix(args, "-link-rate 400000000bit -link-burst 200000 -experiments bench-agent"+tlsArgs); got != (s.name == SysOursTLS) {
			t.Errorf("%s: TLS flags %v: %s", s.name, got, args)
		}
	}
}

func TestTLSOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Scenario: "broadcast", TLS: true}, "--tls needs --testbed"},
		{Options{Scenario: "failure", TLS: true, Testbed: &Testbed{}}, "failure"},
	} {
		if _, err := Run(t.Context(), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
}

// The run's member certificate names every testbed host and the bridge
// (the nodes dial the TLS driver there) as IP SANs, signed by the run's
// CA, in the log dir; the TLS driver starts on the bridge address.
func TestTLSDriverCerts(t *testing.T) {
	dir := t.TempDir()
	tb := &Testbed{Hosts: []string{"198.18.3.1", "198.18.3.2", "198.18.3.3"}, Bridge: "127.0.0.1"}
	if got := tlsHosts(tb); !slices.Equal(got, []string{"198.18.3.1", "198.18.3.2", "198.18.3.3", "127.0.0.1"}) {
		t.Errorf("tlsHosts %v", got)
	}
	system, files, err := startTLSDriver(tb, dir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer system.Shutdown()
	if !strings.HasPrefix(system.Address(), "127.0.0.1:") {
		t.Errorf("TLS driver at %s, want the bridge address", system.Address())
	}
	if filepath.Dir(files.Cert) != filepath.Join(dir, "tls") || filepath.Dir(files.CA) != filepath.Join(dir, "tls") {
		t.Errorf("certificates %+v, want them in %s/tls", files, dir)
	}
	ca, leaf := readCert(t, files.CA), readCert(t, files.Cert)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	var sans []string
	for _, ip := range leaf.IPAddresses {
		sans = append(sans, ip.String())
	}
	for _, h := range tlsHosts(tb) {
		if !slices.Contains(sans, h) {
			t.Errorf("no IP SAN %s in %v", h, sans)
		}
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("the certificate does not verify for %s (%v): %v", h, usage, err)
			}
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "198.18.3.9", Roots: pool}); err == nil {
		t.Error("the certificate verifies for a host not in the testbed")
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recorder notes which system each Put ran on, and how many backends are
// open at once.
type recorder struct {
	mu         sync.Mutex
	puts       []string
	open, peak int
}

type recBackend struct {
	backend
	r    *recorder
	name string
}

func (b recBackend) Put(ctx context.Context, host int, id string, at time.Time) (time.Time, error) {
	b.r.mu.Lock()
	b.r.puts = append(b.r.puts, b.name)
	b.r.mu.Unlock()
	return b.backend.Put(ctx, host, id, at)
}

func (b recBackend) Close() {
	b.r.mu.Lock()
	b.r.open--
	b.r.mu.Unlock()
	b.backend.Close()
}

// On the testbed ours and ours-tls run side by side, their repetitions
// (warm-up included) alternating in a rotating order. By default the
// other systems take their turns in the same rounds; --sequential keeps
// the order from before: ours and ours-tls alternate, the others run
// after them, one at a time. The ratio to ours appears in the RESULT
// line. (In-process backends stand in for the testbed's nodes.)
func TestTLSInterleavesWithOurs(t *testing.T) {
	for _, c := range []struct {
		sequential bool
		warmup     int
		want       []string
		peak       int
	}{
		// Warm-ups, then rep 1 in list order, rep 2 rotated by one, rep 3
		// by two, each rep right after a warm-up of its own.
		{false, 1, []string{SysOurs, SysOursTLS, SysNaive,
			SysOurs, SysOurs, SysOursTLS, SysOursTLS, SysNaive, SysNaive,
			SysOursTLS, SysOursTLS, SysNaive, SysNaive, SysOurs, SysOurs,
			SysNaive, SysNaive, SysOurs, SysOurs, SysOursTLS, SysOursTLS}, 3},
		// naive runs alone afterwards: its warm-up, then its reps.
		{true, 1, []string{SysOurs, SysOursTLS,
			SysOurs, SysOurs, SysOursTLS, SysOursTLS,
			SysOursTLS, SysOursTLS, SysOurs, SysOurs,
			SysOurs, SysOurs, SysOursTLS, SysOursTLS,
			SysNaive, SysNaive, SysNaive, SysNaive}, 2},
		// --warmup 0: no warm-up at all, cold reps.
		{false, 0, []string{SysOurs, SysOursTLS, SysNaive, SysOursTLS, SysNaive, SysOurs, SysNaive, SysOurs, SysOursTLS}, 3},
	} {
		t.Run(fmt.Sprintf("sequential=%v,warmup=%d", c.sequential, c.warmup), func(t *testing.T) {
			rec := &recorder{}
			o := Options{Scenario: "broadcast", Nodes: 3, Sizes: []int64{64 << 10}, Reps: 3, Warmup: c.warmup, Peers: []string{"naive"},
				Bandwidth: Bandwidth{BitsPerSecond: 4e9}, OpTimeout: 20 * time.Second, Progress: io.Discard, TLS: true,
				Testbed: &Testbed{}, Sequential: c.sequential,
				newBackend: func(o *Options, s system, log *logrus.Logger) (backend, error) {
					b, err := openLocal(o, system{name: s.name, exp: experiments.Set{Naive: s.exp.Naive}}, log)
					if err != nil {
						return nil, err
					}
					rec.mu.Lock()
					rec.open++
					rec.peak = max(rec.peak, rec.open)
					rec.mu.Unlock()
					return recBackend{backend: b, r: rec, name: s.name}, nil
				}}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			r, err := Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.puts, c.want) {
				t.Errorf("puts ran on %v, want %v", rec.puts, c.want)
			}
			if rec.peak != c.peak || rec.open != 0 {
				t.Errorf("backends open at once: peak %d, left open %d; want %d, 0", rec.peak, rec.open, c.peak)
			}
			var tlsRes *Result
			for i := range r.Results {
				if res := &r.Results[i]; res.System == SysOursTLS {
					tlsRes = res
				} else if !res.ok() {
					t.Errorf("%s: %s %s", res.System, res.Status, res.Reason)
				}
			}
			if tlsRes == nil || !tlsRes.ok() || len(tlsRes.Times) != 3 || tlsRes.Ratio <= 0 {
				t.Fatalf("ours-tls: %+v", tlsRes)
			}
			lines := r.ResultLines()
			if len(lines) != 1 || !resultLine.MatchString(lines[0]) || !strings.Contains(lines[0], " ours-tls=") ||
				!strings.HasSuffix(lines[0], fmt.Sprintf(" ours-tls/ours=%.3fx", tlsRes.Ratio)) {
				t.Errorf("RESULT lines %q", lines)
			}
			var table strings.Builder
			r.WriteTable(&table)
			if !strings.Contains(table.String(), SysOursTLS) || !strings.Contains(table.String(), fmt.Sprintf("%.2fx", tlsRes.Ratio)) {
				t.Errorf("table without ours-tls:\n%s", table.String())
			}
		})
	}
}
