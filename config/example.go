package config

import (
	"bytes"
	"strings"
)

// exampleHeader opens the documented config file.
const exampleHeader = `# legion.toml: Legion's configuration (see legion.toml(5)).
#
# Legion reads $XDG_CONFIG_HOME/legion/legion.toml (~/.config/legion/legion.toml),
# or the file given with --config. This file documents every key. A line
# "#key = value" shows the key's default (or, for a key with no default, an
# example): remove the "#" to set it. Everything commented out, the file is
# valid and means "all defaults, no teams".
#
# Durations are strings such as "30s", "10m", "1h30m" or "2min 30s". Sizes are
# bytes, or strings such as "512M" or "4G" (base 1024). Unknown keys, wrong
# types and bad values are errors naming the file, the line and the key.
#
# Generated from the schema in package config; edit the schema, then run
# go test ./config -run TestShippedFile -update
`

const defaultsIntro = `# [defaults] holds the team settings every [teams.<name>] table starts from;
# a team's own keys override them. Sub-tables are written as dotted keys here
# (agent.new, linear.team_key), or as [defaults.linear] tables.
`

const teamsIntro = `# One [teams.<name>] table per team. The name may hold any characters but
# control characters (quote it: [teams."my team"]); it appears in unit names,
# escaped. ` + "`legion team add NAME --workspace DIR`" + ` appends a table with a
# fresh id. Every key of [defaults] can be set per team; these only per team:
`

// ExampleFile returns the documented legion.toml that the repository ships:
// every key of Schema with its documentation and default, all commented
// out, and a commented example team.
func ExampleFile() []byte {
	var b bytes.Buffer
	b.WriteString(exampleHeader)
	section := func(header, intro, table string, perTeam bool) {
		b.WriteString("\n" + intro + header + "\n")
		for _, s := range Schema {
			if s.Table != table || s.PerTeam != perTeam {
				continue
			}
			b.WriteString("\n")
			writeDoc(&b, s)
			if !perTeam {
				b.WriteString("#" + s.Key + " = " + exampleValue(s) + "\n")
			}
		}
	}
	section("[helper]", "# [helper] configures the helper, legion.service (`legion helper`).\n", TableHelper, false)
	section("[worker]", "# [worker] configures every pty-worker, the process hosting one agent session.\n", TableWorker, false)
	section("[web]", "# [web] configures the dashboard, legion-web.socket and legion-web.service (`legion web`).\n", TableWeb, false)
	section("[defaults]", defaultsIntro, TableTeam, false)

	b.WriteString("\n")
	b.WriteString(teamsIntro)
	for _, s := range Schema {
		if s.Table == TableTeam && s.PerTeam {
			b.WriteString("#\n")
			writeDoc(&b, s)
		}
	}
	b.WriteString("#\n# An example team:\n#\n#[teams.demo]\n")
	for _, s := range Schema {
		if s.Table == TableTeam && s.PerTeam {
			b.WriteString("#" + s.Key + " = " + exampleValue(s) + "\n")
		}
	}
	b.WriteString("#wip_limit = 2\n#memory_max = \"8G\"\n")
	return b.Bytes()
}

// exampleValue is the value shown for s: its default, else its example.
func exampleValue(s Setting) string {
	if s.Default != "" {
		return s.Default
	}
	return s.Example
}

// writeDoc writes the key's documentation as wrapped comment lines.
func writeDoc(b *bytes.Buffer, s Setting) {
	text := s.Key + " (" + s.Type + "): " + s.Doc
	const width = 78
	line := "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > width && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}
