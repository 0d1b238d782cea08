package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hoplite-go/hoplite/bench"
)

// A document holds a `hoplite bench ops` table between the markers
//
//	<!-- hoplite bench ops FILE [FILE ...] -->
//	<!-- end hoplite bench ops -->
//
// made of the JSON reports FILE (in the results directory): the medians
// of their rows (bench.OpsMarkdown).
const (
	opsBegin = "<!-- hoplite bench ops "
	opsEnd   = "<!-- end hoplite bench ops -->"
)

// regenerateOps replaces every marked ops table in doc with the one its
// reports make.
func regenerateOps(doc, results string) (string, error) {
	var out strings.Builder
	for {
		i := strings.Index(doc, opsBegin)
		if i < 0 {
			out.WriteString(doc)
			return out.String(), nil
		}
		argsEnd := strings.Index(doc[i:], " -->")
		if argsEnd < 0 {
			return "", fmt.Errorf("an ops table marker without its end")
		}
		files := strings.Fields(doc[i+len(opsBegin) : i+argsEnd])
		if len(files) == 0 {
			return "", fmt.Errorf("an ops table marker names no report")
		}
		j := strings.Index(doc[i:], opsEnd)
		if j < 0 {
			return "", fmt.Errorf("ops table %v: no %s", files, opsEnd)
		}
		var runs []*bench.OpsReport
		for _, f := range files {
			r, err := bench.ReadOpsJSON(filepath.Join(results, f))
			if err != nil {
				return "", err
			}
			runs = append(runs, r)
		}
		out.WriteString(doc[:i+argsEnd+len(" -->")] + "\n" + bench.OpsMarkdown(runs))
		doc = doc[i+j:]
		out.WriteString(doc[:len(opsEnd)])
		doc = doc[len(opsEnd):]
	}
}
