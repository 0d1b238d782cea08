package moduletest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEQuickstart: the README shows examples/quickstart/main.go and
// examples/actor/main.go verbatim, so the programs TestDependentModule
// builds in another module and runs are the ones a reader copies.
func TestREADMEQuickstart(t *testing.T) {
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"quickstart", "actor"} {
		src, err := os.ReadFile(filepath.Join(root, "examples", p, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
			t.Errorf("README.md has no ```go block that is examples/%s/main.go; the README's block must be the file, verbatim:\n%s", p, src)
		}
	}
}
