package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/hoplite-go/hoplite/bench"
)

const completionUsage = `usage: hoplite completion bash|zsh

Prints a completion script for the shell, made from this binary's own
commands and flags:

  bash: source <(hoplite completion bash)       (or save it in
        /etc/bash_completion.d/hoplite)
  zsh:  hoplite completion zsh > "${fpath[1]}/_hoplite"   (then compinit)
`

func completionCommand(args []string, stdout, stderr io.Writer) error {
	if slices.ContainsFunc(args, isHelp) {
		fmt.Fprint(stdout, completionUsage)
		return nil
	}
	switch {
	case len(args) == 0:
		return usageError{"want bash or zsh"}
	case len(args) > 1:
		return usageError{fmt.Sprintf("unexpected arguments %q after the shell", args[1:])}
	}
	cmds := completionCommands()
	switch args[0] {
	case "bash":
		return writeBashCompletion(stdout, cmds)
	case "zsh":
		return writeZshCompletion(stdout, cmds)
	}
	return usageError{fmt.Sprintf("shell %q: want bash or zsh", args[0])}
}

// flagValues are the flags whose values completion offers: reduce's and
// allreduce's enumerations.
var flagValues = []struct{ flag, values string }{
	{"--op", "sum min max prod"},
	{"--dtype", "float32 float64 int32 int64"},
}

// completionCmd is one command line prefix ("bench p2p") and its flags.
type completionCmd struct {
	words []string
	flags []string
}

var (
	usageCommand = regexp.MustCompile(`(?m)^  ([a-z][a-z0-9-]*) +\S`)
	usageFlag    = regexp.MustCompile(`(?m)^  -([a-zA-Z0-9-]+)`)
)

// completionCommands reads the commands from the usage text and each
// command's flags from its own -h output, so that completion follows the
// binary as it is.
func completionCommands() []completionCmd {
	var out []completionCmd
	for _, m := range usageCommand.FindAllStringSubmatch(usage, -1) {
		name := m[1]
		if slices.ContainsFunc(out, func(c completionCmd) bool { return c.words[0] == name }) {
			continue
		}
		out = append(out, completionCmd{words: []string{name}, flags: flagsOf(name)})
		if name == "bench" {
			for _, sub := range benchCompletions() {
				out = append(out, completionCmd{words: []string{"bench", sub}, flags: flagsOf("bench", sub)})
			}
		}
	}
	return out
}

// benchCompletions are the words after "hoplite bench" that completion
// offers: its listed subcommands and the scenarios (not the hidden
// p2p-peer and load-spin).
func benchCompletions() []string {
	subs := []string{"p2p", "p2p-tcp", "report", "scale-plot", "routes"}
	for _, s := range bench.Scenarios {
		if !slices.Contains(subs, s) {
			subs = append(subs, s)
		}
	}
	return subs
}

// flagsOf runs "hoplite WORDS -h" in this process and collects the flags
// its usage lists.
func flagsOf(words ...string) []string {
	if words[0] == "completion" || words[0] == "version" {
		return nil
	}
	var buf bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing may start
	run(ctx, append(slices.Clone(words), "-h"), &buf, &buf)
	var flags []string
	for _, m := range usageFlag.FindAllStringSubmatch(buf.String(), -1) {
		if !slices.Contains(flags, "--"+m[1]) {
			flags = append(flags, "--"+m[1])
		}
	}
	return flags
}

func writeBashCompletion(w io.Writer, cmds []completionCmd) error {
	var b strings.Builder
	b.WriteString("# bash completion for hoplite (hoplite completion bash)\n_hoplite() {\n")
	b.WriteString("    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n")
	b.WriteString("    if [[ $COMP_CWORD -eq 1 ]]; then\n")
	fmt.Fprintf(&b, "        COMPREPLY=($(compgen -W %q -- \"$cur\"))\n        return\n    fi\n", strings.Join(topWords(cmds), " ")+" --version -h")
	for _, v := range flagValues {
		fmt.Fprintf(&b, "    if [[ $prev == %s ]]; then\n        COMPREPLY=($(compgen -W %q -- \"$cur\"))\n        return\n    fi\n", v.flag, v.values)
	}
	b.WriteString("    if [[ $prev == --*-file || $prev == --tls-* || $prev == --dir || $prev == --json || $prev == --plot ]]; then\n")
	b.WriteString("        COMPREPLY=($(compgen -f -- \"$cur\"))\n        return\n    fi\n")
	b.WriteString("    local words=\"\"\n    case \"${COMP_WORDS[1]} ${COMP_WORDS[2]}\" in\n")
	// The longer prefixes first: "bench p2p" before "bench".
	for _, c := range sortedLongestFirst(cmds) {
		pat := `"` + c.words[0] + ` "*`
		if len(c.words) == 2 {
			pat = `"` + c.words[0] + " " + c.words[1] + `"`
		}
		fmt.Fprintf(&b, "    %s) words=%q ;;\n", pat, strings.Join(c.flags, " ")+subWords(c, cmds))
	}
	b.WriteString("    esac\n")
	b.WriteString("    if [[ ${COMP_WORDS[1]} == completion ]]; then words=\"bash zsh\"; fi\n")
	b.WriteString("    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n    if [[ ${#COMPREPLY[@]} -eq 0 ]]; then COMPREPLY=($(compgen -f -- \"$cur\")); fi\n}\n")
	b.WriteString("complete -F _hoplite hoplite\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeZshCompletion(w io.Writer, cmds []completionCmd) error {
	var b strings.Builder
	b.WriteString("#compdef hoplite\n# zsh completion for hoplite (hoplite completion zsh)\n_hoplite() {\n")
	b.WriteString("    if (( CURRENT == 2 )); then\n")
	fmt.Fprintf(&b, "        compadd -- %s --version -h\n        return\n    fi\n", strings.Join(topWords(cmds), " "))
	for _, v := range flagValues {
		fmt.Fprintf(&b, "    if [[ ${words[CURRENT-1]} == %s ]]; then\n        compadd -- %s\n        return\n    fi\n", v.flag, v.values)
	}
	b.WriteString("    local -a words_\n    case \"${words[2]} ${words[3]}\" in\n")
	for _, c := range sortedLongestFirst(cmds) {
		pat := c.words[0] + "\\ *"
		if len(c.words) == 2 {
			pat = c.words[0] + "\\ " + c.words[1]
		}
		fmt.Fprintf(&b, "    (%s) words_=(%s) ;;\n", pat, strings.TrimSpace(strings.Join(c.flags, " ")+subWords(c, cmds)))
	}
	b.WriteString("    esac\n    [[ ${words[2]} == completion ]] && words_=(bash zsh)\n")
	b.WriteString("    if [[ $PREFIX == -* ]]; then compadd -- $words_; else _files; compadd -- ${words_:#-*}; fi\n}\n")
	b.WriteString("compdef _hoplite hoplite\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func topWords(cmds []completionCmd) []string {
	var out []string
	for _, c := range cmds {
		if len(c.words) == 1 {
			out = append(out, c.words[0])
		}
	}
	return out
}

// subWords are the second words of c's longer commands ("p2p" after
// "bench"), for the word after c.
func subWords(c completionCmd, cmds []completionCmd) string {
	var s string
	for _, o := range cmds {
		if len(c.words) == 1 && len(o.words) == 2 && o.words[0] == c.words[0] {
			s += " " + o.words[1]
		}
	}
	return s
}

func sortedLongestFirst(cmds []completionCmd) []completionCmd {
	out := slices.Clone(cmds)
	slices.SortStableFunc(out, func(a, b completionCmd) int { return len(b.words) - len(a.words) })
	return out
}
