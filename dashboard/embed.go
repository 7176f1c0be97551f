package dashboard

import "embed"

// staticFS holds the app: index.html, the shell and views' scripts, the
// style sheet and the vendored third-party code.
//
//go:embed static
var staticFS embed.FS
