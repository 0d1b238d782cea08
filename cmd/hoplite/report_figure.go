package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hoplite-go/hoplite/bench"
)

// A figure in a document's prose is generated like a table's: a marker
// names the report it comes from, and the figure follows the marker.
//
//	<!-- hoplite bench figure FILE SCENARIO SIZE SYSTEM -->0.718 s
//	<!-- hoplite bench figure FILE SCENARIO SIZE SYSTEM/SYSTEM -->0.84×
//
// The first is that system's median (as the tables print it), the
// second the ratio of two systems' medians in the same run. A system may
// name another of its statistics: SYSTEM:min, SYSTEM:max or SYSTEM:cpu
// (the median CPU per operation). The marker does not show when the
// document is rendered; the figure does.

const figureBegin = "<!-- hoplite bench figure "

// figureMarker matches a marker and the figure after it (none yet, or
// one that a regeneration replaces).
var figureMarker = regexp.MustCompile(`<!-- hoplite bench figure (\S+) (\S+) (\S+) (\S+) -->([0-9][0-9.]*(?: m?s|×))?`)

// fence matches a fenced code block: a marker shown there is an example,
// not a figure.
var fence = regexp.MustCompile("(?ms)^```.*?^```")

// regenerateFigures replaces the figure after every marker in doc, outside
// its code blocks, with the one its report gives.
func regenerateFigures(doc, results string) (string, error) {
	var out strings.Builder
	last := 0
	for _, block := range fence.FindAllStringIndex(doc, -1) {
		prose, err := regenerateProseFigures(doc[last:block[0]], results)
		if err != nil {
			return "", err
		}
		out.WriteString(prose)
		out.WriteString(doc[block[0]:block[1]])
		last = block[1]
	}
	prose, err := regenerateProseFigures(doc[last:], results)
	if err != nil {
		return "", err
	}
	out.WriteString(prose)
	return out.String(), nil
}

// lineStartMarker is a marker that begins a line: Markdown would end the
// paragraph there and show the figure as a block of HTML of its own.
var lineStartMarker = regexp.MustCompile(`(?m)^[ \t]*` + regexp.QuoteMeta(figureBegin))

func regenerateProseFigures(doc, results string) (string, error) {
	if loc := lineStartMarker.FindStringIndex(doc); loc != nil {
		return "", fmt.Errorf("a figure marker begins a line (%q): put a word of its sentence before it on the line", strings.TrimSpace(doc[loc[0]:min(len(doc), loc[1]+40)]))
	}
	var firstErr error
	out := figureMarker.ReplaceAllStringFunc(doc, func(m string) string {
		sub := figureMarker.FindStringSubmatch(m)
		fig, err := figure(results, sub[1], sub[2], sub[3], sub[4])
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("figure %s %s %s %s: %w", sub[1], sub[2], sub[3], sub[4], err)
			}
			return m
		}
		return m[:len(m)-len(sub[5])] + fig
	})
	if firstErr != nil {
		return "", firstErr
	}
	// A marker the pattern did not take (a field missing, say) would
	// otherwise stand in the document unchecked.
	if n, m := strings.Count(doc, figureBegin), len(figureMarker.FindAllStringIndex(doc, -1)); n != m {
		return "", fmt.Errorf("%d of %d figure markers are not %sFILE SCENARIO SIZE SYSTEM[/SYSTEM] -->", n-m, n, figureBegin)
	}
	return out, nil
}

// figure is what a marker's fields make of the report file in results:
// a system's median, or two systems' ratio.
func figure(results, file, scenario, sizeText, expr string) (string, error) {
	r, err := bench.ReadJSON(filepath.Join(results, filepath.FromSlash(file)))
	if err != nil {
		return "", err
	}
	size, err := bench.ParseSize(sizeText)
	if err != nil {
		return "", err
	}
	median := func(term string) (float64, error) {
		system, stat, _ := strings.Cut(term, ":")
		for _, res := range r.Results {
			if res.Scenario != scenario || res.Size != size || res.System != system || res.Status != bench.StatusOK {
				continue
			}
			v := map[string]float64{"": res.Median, "min": res.Min, "max": res.Max, "cpu": res.CPUMedian}
			x, known := v[stat]
			if !known {
				return 0, fmt.Errorf("%s: no statistic %q (min, max or cpu, or none for the median)", term, stat)
			}
			if x > 0 {
				return x, nil
			}
		}
		return 0, fmt.Errorf("no result of %s for %s %s in %s", term, scenario, sizeText, file)
	}
	num, den, ratio := strings.Cut(expr, "/")
	a, err := median(num)
	if err != nil {
		return "", err
	}
	if !ratio {
		return duration(a), nil
	}
	b, err := median(den)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%.2f×", a/b), nil
}
