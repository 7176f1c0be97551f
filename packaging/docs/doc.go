// Package docs generates Legion's manual pages and shell completions from
// the two sources of truth: the cobra command tree (legion(1) and one page
// per subcommand, as legion-install(1) and so on; bash, zsh and fish
// completions) and config.Schema (legion.toml(5)). `legion docs` calls it
// at build time; `make man`, `make completions` and `make package` use that.
//
// The generators are pure: they return bytes, and WriteTree writes them
// under one directory. The package must never run commands, read the
// user's configuration or home, or write outside the directory it is
// given; its output depends only on its inputs (SOURCE_DATE_EPOCH-style
// dates are the caller's choice), so packages build reproducibly.
package docs
