package bench

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// ParseSize reads a size the way every hoplite command takes one: bytes
// ("4096"), binary units ("32KiB", "1.5MiB", "1GiB") or decimal ones
// ("32KB", "1.5MB", "1GB"), parsed by go-humanize.
func ParseSize(s string) (int64, error) {
	n, err := humanize.ParseBytes(strings.TrimSpace(s))
	if err != nil || n == 0 || n > 1<<62 {
		return 0, fmt.Errorf("size %q: want a positive size like 4096, 1.5MiB or 32MB (KiB, MiB, GiB are binary; KB, MB, GB decimal)", s)
	}
	return int64(n), nil
}

// ParseSizes reads a comma-separated list of sizes.
func ParseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no size in %q", s)
	}
	return out, nil
}

// SizeName is the short binary name of n: "1KiB", "32MiB", "1000B".
func SizeName(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// Bandwidth is a per-host link rate.
type Bandwidth struct {
	// BitsPerSecond is the rate (decimal units: 400 Mbit/s is 4e8).
	BitsPerSecond float64
}

// BytesPerSecond is the rate in bytes per second.
func (b Bandwidth) BytesPerSecond() float64 { return b.BitsPerSecond / 8 }

// TC is the rate in tc's units, as the testbed script takes it: "400mbit".
func (b Bandwidth) TC() string {
	v := b.BitsPerSecond
	for _, u := range []struct {
		name string
		mult float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if v >= u.mult && math.Mod(v, u.mult) == 0 {
			return fmt.Sprintf("%d%s", int64(v/u.mult), u.name)
		}
	}
	return fmt.Sprintf("%dkbit", int64(math.Round(v/1e3)))
}

// String is a readable rate: "400 Mbit/s".
func (b Bandwidth) String() string {
	v := b.BitsPerSecond
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', 4, 64) + " Gbit/s"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + " Mbit/s"
	}
	return strconv.FormatFloat(v/1e3, 'g', 4, 64) + " kbit/s"
}

var bandwidthRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([kKmMgG]?)(bit|Bit|bps|Bps|B|b)?(/s)?$`)

// ParseBandwidth reads a rate in bits, decimal: "400mbit", "400Mbit/s",
// "400mbps", "1gbit", "500kbit"; or in bytes with a capital B: "50MB/s",
// "50MBps".
func ParseBandwidth(s string) (Bandwidth, error) {
	m := bandwidthRE.FindStringSubmatch(strings.TrimSpace(s))
	bad := fmt.Errorf("bandwidth %q: want a rate like 400mbit, 1gbit or 50MB/s", s)
	if m == nil || (m[3] == "" && m[4] != "") {
		return Bandwidth{}, bad
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v <= 0 {
		return Bandwidth{}, bad
	}
	v *= map[string]float64{"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[strings.ToLower(m[2])]
	if m[3] == "B" || m[3] == "Bps" {
		v *= 8
	}
	if v < 8e3 {
		return Bandwidth{}, fmt.Errorf("bandwidth %q: below 8 kbit/s", s)
	}
	return Bandwidth{BitsPerSecond: v}, nil
}

// Seconds formats a duration as seconds with 4 significant digits
// ("0.6711s", "12.35s").
func Seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'g', 4, 64) + "s"
}

// ParseDurations reads a comma-separated list of durations ("0,50ms,1s").
func ParseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if f == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("interval %q: want a duration like 50ms", f)
		}
		out = append(out, d)
	}
	return out, nil
}
