package deploy

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, its continuation lines
// joined.
type instruction struct{ cmd, args string }

// stage is one FROM of a multi-stage Dockerfile and what follows it.
type stage struct {
	from, name string
	body       []instruction
}

// parseDockerfile reads ../Dockerfile into its stages.
func parseDockerfile(t *testing.T) []stage {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") && line == "" {
			continue
		}
		if c, ok := strings.CutSuffix(l, "\\"); ok {
			line += c
			continue
		}
		line += l
		cmd, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		line = ""
		if cmd == "" {
			continue
		}
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			from, name, _ := strings.Cut(args, " AS ")
			stages = append(stages, stage{from: strings.TrimSpace(from), name: strings.TrimSpace(name)})
			continue
		}
		if len(stages) == 0 {
			continue // ARG before the first FROM
		}
		s := &stages[len(stages)-1]
		s.body = append(s.body, instruction{cmd, strings.TrimSpace(args)})
	}
	if len(stages) == 0 {
		t.Fatal("the Dockerfile has no FROM")
	}
	return stages
}

// last is the stage's last args of cmd ("" if none).
func (s stage) last(cmd string) string {
	var v string
	for _, in := range s.body {
		if in.cmd == cmd {
			v = in.args
		}
	}
	return v
}

// execForm parses an instruction's JSON array (its exec form), failing
// the test on the shell form, which the image cannot run: it has no
// shell.
func execForm(t *testing.T, what, s string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("%s %s: want the exec form, a JSON array (the image has no shell)", what, s)
	}
	return argv
}

// image is what the final stage runs: its ENTRYPOINT and CMD, and its
// HEALTHCHECK's command.
type image struct {
	entrypoint, cmd, healthcheck []string
	user                         string
}

func finalImage(t *testing.T) image {
	t.Helper()
	stages := parseDockerfile(t)
	final := stages[len(stages)-1]
	hc := final.last("HEALTHCHECK")
	_, hcCmd, ok := strings.Cut(hc, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %q: want a CMD", hc)
	}
	return image{entrypoint: execForm(t, "ENTRYPOINT", final.last("ENTRYPOINT")), cmd: execForm(t, "CMD", final.last("CMD")),
		healthcheck: execForm(t, "HEALTHCHECK CMD", hcCmd), user: final.last("USER")}
}
