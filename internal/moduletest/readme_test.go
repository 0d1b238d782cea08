package moduletest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEQuickstart: the README shows examples/quickstart/main.go
// verbatim, so the program TestDependentModule builds in another module
// and runs is the one a reader copies.
func TestREADMEQuickstart(t *testing.T) {
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Errorf("README.md has no ```go block that is examples/quickstart/main.go; the README's block must be the file, verbatim:\n%s", src)
	}
}
