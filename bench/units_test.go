package bench

import (
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1KiB": 1024, "32KiB": 32 << 10, "1MiB": 1 << 20, "32MiB": 32 << 20,
		"256MiB": 256 << 20, "1GiB": 1 << 30, "4096": 4096, " 8 KiB ": 8 << 10, "1.5MiB": 3 << 19,
		"32MB": 32e6, "1GB": 1e9, "1.5kB": 1500, "2M": 2e6, "1TiB": 1 << 40} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "MiB", "12 parsecs", "1e30"} {
		if n, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, n)
		}
	}
	got, err := ParseSizes("1KiB, 32KiB,1MiB")
	if err != nil || len(got) != 3 || got[1] != 32<<10 {
		t.Errorf("ParseSizes = %v, %v", got, err)
	}
	for n, want := range map[int64]string{1024: "1KiB", 32 << 20: "32MiB", 1 << 30: "1GiB", 1000: "1000B", 1536: "1536B"} {
		if got := SizeName(n); got != want {
			t.Errorf("SizeName(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseBandwidth(t *testing.T) {
	for in, want := range map[string]float64{"400mbit": 400e6, "400Mbit/s": 400e6, "400mbps": 400e6, "1gbit": 1e9,
		"1Gbit/s": 1e9, "500kbit": 500e3, "50MB/s": 400e6, "2.5gbit": 2.5e9} {
		got, err := ParseBandwidth(in)
		if err != nil || got.BitsPerSecond != want {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %v bit/s", in, got.BitsPerSecond, err, want)
		}
	}
	for _, in := range []string{"", "fast", "0mbit", "-1gbit", "400/s", "1bit"} {
		if b, err := ParseBandwidth(in); err == nil {
			t.Errorf("ParseBandwidth(%q) = %v, want an error", in, b)
		}
	}
	b := Bandwidth{BitsPerSecond: 400e6}
	if b.BytesPerSecond() != 50e6 || b.TC() != "400mbit" || b.String() != "400 Mbit/s" {
		t.Errorf("400 Mbit/s: %v B/s, tc %q, %q", b.BytesPerSecond(), b.TC(), b.String())
	}
	if tc := (Bandwidth{BitsPerSecond: 2.5e9}).TC(); tc != "2500mbit" {
		t.Errorf("2.5 Gbit/s in tc units: %q", tc)
	}
}

func TestParseDurations(t *testing.T) {
	got, err := ParseDurations("0,50ms, 1s")
	if err != nil || len(got) != 3 || got[0] != 0 || got[1] != 50*time.Millisecond || got[2] != time.Second {
		t.Errorf("ParseDurations = %v, %v", got, err)
	}
	if _, err := ParseDurations("-5ms"); err == nil {
		t.Error("a negative interval was accepted")
	}
}

func TestSummarize(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		in          []time.Duration
		med, lo, hi time.Duration
		n           int
	}{
		{ms(30, 10, 20), 20 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 3},
		{ms(40, 10, 30, 20), 25 * time.Millisecond, 10 * time.Millisecond, 40 * time.Millisecond, 4},
		{ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 1},
		{nil, 0, 0, 0, 0},
	} {
		in := append([]time.Duration(nil), c.in...)
		s := Summarize(c.in)
		if s.Median != c.med || s.Min != c.lo || s.Max != c.hi || s.N != c.n {
			t.Errorf("Summarize(%v) = %+v", c.in, s)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("Summarize reordered its input: %v", c.in)
			}
		}
	}
}

// The float32 sources sum exactly in any order (so a reduce result is
// checked bit for bit), and Check finds a single wrong byte.
func TestDataExactSums(t *testing.T) {
	specs := make([]DataSpec, 8)
	for i := range specs {
		specs[i] = DataSpec{ID: "src-" + string(rune('a'+i)), Size: 4096, Float32: true, Sources: 8}
	}
	fwd, err := expected(specs)
	if err != nil {
		t.Fatal(err)
	}
	rev := make([]DataSpec, len(specs))
	for i := range specs {
		rev[i] = specs[len(specs)-1-i]
	}
	if err := Check("sum", fwd, rev); err != nil {
		t.Errorf("the sum depends on the order: %v", err)
	}
	a, b := Generate(specs[0]), Generate(specs[1])
	if string(a) == string(b) || string(a) != string(Generate(specs[0])) {
		t.Error("sources are not distinct and reproducible")
	}
	bad := append([]byte(nil), fwd...)
	bad[1000] ^= 1
	if err := Check("sum", bad, specs); err == nil {
		t.Error("Check accepted a flipped bit")
	}
	if err := Check("one", Generate(DataSpec{ID: "x", Size: 100}), []DataSpec{{ID: "y", Size: 100}}); err == nil {
		t.Error("Check accepted another object's bytes")
	}
}

func TestSecs(t *testing.T) {
	for in, want := range map[float64]string{4.915: "4.915s", 12.345: "12.35s", 0.8484: "0.8484s", 5.5e-5: "0.000055s",
		0.6711: "0.6711s", 1234.6: "1235s", 0: "0.000s"} {
		if got := secs(in); got != want {
			t.Errorf("secs(%v) = %q, want %q", in, got, want)
		}
	}
}
