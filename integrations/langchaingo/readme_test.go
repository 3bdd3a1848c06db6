package langchaingo_test

import (
	"os"
	"strings"
	"testing"
)

// The README's LangChainGo example is ExampleNew, which runs with its
// output checked: the two must stay the same text.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- langchaingo-example -->\n```go\n")
	block, _, ok2 := strings.Cut(block, "```\n<!-- /langchaingo-example -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no LangChainGo example between its markers")
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, _ := strings.Cut(string(src), "func ExampleNew() {")
	if want := "func ExampleNew() {" + strings.TrimRight(fn, "\n") + "\n"; block != want {
		t.Errorf("README.md's LangChainGo example differs from ExampleNew in example_test.go:\n%s\n---\n%s", block, want)
	}
}
