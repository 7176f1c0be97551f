package docs

import (
	"bytes"
	"fmt"

	"github.com/spf13/cobra"
)

// Completions generates the bash, zsh and fish completion scripts of root,
// named as their shells look them up, so each installs under its
// directory unchanged:
//
//	bash/legion       /usr/share/bash-completion/completions/legion
//	zsh/_legion       /usr/share/zsh/vendor-completions/_legion
//	fish/legion.fish  /usr/share/fish/vendor_completions.d/legion.fish
//
// The scripts are cobra's: they ask the binary itself (`legion __complete
// ARGS`) for candidates, so they stay right as commands and flags change.
// The bash script needs the bash-completion package, as every script in
// that directory does.
func Completions(root *cobra.Command) ([]File, error) {
	name := root.Name()
	gens := []struct {
		path string
		gen  func(*bytes.Buffer) error
	}{
		{"bash/" + name, func(b *bytes.Buffer) error { return root.GenBashCompletionV2(b, true) }},
		{"fish/" + name + ".fish", func(b *bytes.Buffer) error { return root.GenFishCompletion(b, true) }},
		{"zsh/_" + name, func(b *bytes.Buffer) error { return root.GenZshCompletion(b) }},
	}
	var files []File
	for _, g := range gens {
		var b bytes.Buffer
		if err := g.gen(&b); err != nil {
			return nil, fmt.Errorf("generate completion %s: %w", g.path, err)
		}
		files = append(files, File{Path: g.path, Data: b.Bytes()})
	}
	return files, nil
}
