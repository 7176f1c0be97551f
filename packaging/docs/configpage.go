package docs

import (
	"fmt"
	"strings"

	"github.com/legion-dev/legion/config"
)

// tableIntro says what each table of the schema is for; a table the schema
// gains later without an entry here still gets its keys documented.
var tableIntro = map[string]string{
	config.TableHelper: "configures the helper, legion.service (`legion helper`): the " +
		"socket-activated control plane that the CLI talks to.",
	config.TableWorker: "configures every pty-worker, the process that hosts one agent " +
		"session in a transient unit of its own.",
	config.TableWeb: "configures the dashboard: legion-web.socket, which `legion install` " +
		"writes, and the server it starts on demand (`legion web serve`).",
	config.TableTeam: "is one team: a git workspace, a tracker and the agents working on " +
		"its issues under the controller legion@NAME.service. The name may hold any " +
		"characters but control characters (quote it: [teams.\"my team\"]). " +
		"`legion team add NAME --workspace DIR` appends a table with a fresh id. " +
		"Every key below that is not marked per team may also be set in [defaults], " +
		"the table every team starts from; a team's own keys override it. Keys of " +
		"sub-tables are written as dotted keys (agent.new = [...]) or in a table of " +
		"their own ([teams.NAME.agent] with new = [...]).",
}

// configExample is the EXAMPLE section's file. A test loads it.
const configExample = `[helper]
idle_exit = "10m"

[defaults]
stale_after = "15m"
memory_max = "8G"

[teams.demo]
id = "6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f"
workspace = "~/src/demo"
wip_limit = 2

[teams.web]
id = "0b7e4c8a-5d2f-4f6e-9a31-2c8d5e7f1a90"
workspace = "~/src/web"
tracker = "linear"
linear.team_key = "WEB"
agent.new = ["claude", "--session-id", "{session_id}", "{prompt}"]
`

// ConfigPage generates legion.toml(5) from schema: every key with its
// type, default and documentation, grouped by table in schema order.
func ConfigPage(schema []config.Setting, o PageOptions) File {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH \"LEGION.TOML\" \"5\" \"%s\" \"%s\" \"%s\"\n", o.Date.UTC().Format("Jan 2006"),
		thArg(o.Source), thArg(o.Manual))
	b.WriteString(".nh\n.ad l\n")
	b.WriteString(".SH NAME\nlegion.toml \\- configuration file of Legion\n")
	b.WriteString(".SH SYNOPSIS\n" + italic("$XDG_CONFIG_HOME/legion/legion.toml") + "\n")
	b.WriteString(".SH DESCRIPTION\n.PP\n")
	b.WriteString(roffInline("Legion reads its configuration from a TOML file: " +
		"$XDG_CONFIG_HOME/legion/legion.toml, that is ~/.config/legion/legion.toml unless " +
		"XDG_CONFIG_HOME is set, or the file given with `legion --config FILE`. " +
		"A missing file means all defaults and no teams."))
	b.WriteString("\n.PP\n")
	b.WriteString(roffInline("Durations are strings such as \"30s\", \"10m\", \"1h30m\" or \"2min 30s\". " +
		"Sizes are integers (bytes) or strings with a K, M, G or T suffix (base 1024) such as \"4G\". " +
		"Paths are absolute or start with ~/."))
	b.WriteString("\n.PP\n")
	b.WriteString(roffInline("Unknown keys, values of the wrong type and bad values are errors " +
		"that name the file, the line and the dotted key (for example teams.demo.stale_after), " +
		"say what was expected, and stop the command; every problem in the file is reported at once. " +
		"Secrets (API keys, tokens) never go in this file: keys name the environment variable " +
		"or file that holds them."))
	b.WriteString("\n.PP\n")
	b.WriteString(roffInline("Changes to limits and restart settings reach systemd through " +
		"`legion install`, which writes them into the team's unit drop-in and slice."))
	b.WriteString("\n")

	b.WriteString(".SH SETTINGS\n")
	for _, table := range tables(schema) {
		fmt.Fprintf(&b, ".SS \"%s\"\n", sectionTitle(table))
		if intro, ok := tableIntro[table]; ok {
			b.WriteString(".PP\n" + roffInline("["+table+"] "+intro) + "\n")
		}
		for _, s := range schema {
			if s.Table != table {
				continue
			}
			b.WriteString(".TP\n")
			b.WriteString(bold(s.Key) + " (" + settingFacts(s) + ")\n")
			b.WriteString(roffInline(s.Doc) + "\n")
		}
	}

	b.WriteString(".SH EXAMPLE\n.PP\n")
	b.WriteString(roffText("Two teams; the second takes its issues from Linear, with the API key in $LINEAR_API_KEY:") + "\n")
	b.WriteString(".PP\n.RS 4\n.nf\n")
	for _, line := range strings.Split(strings.TrimRight(configExample, "\n"), "\n") {
		if line == "" {
			b.WriteString(".sp\n")
			continue
		}
		b.WriteString(roffCode(line) + "\n")
	}
	b.WriteString(".fi\n.RE\n")

	b.WriteString(".SH FILES\n")
	b.WriteString(".TP\n" + italic("~/.config/legion/legion.toml") + "\n" +
		roffText("The configuration file.") + "\n")
	b.WriteString(".TP\n" + italic("/usr/share/doc/legion/legion.toml") + "\n" +
		roffText("Every key with its default, commented out: a starting point.") + "\n")
	b.WriteString(".SH SEE ALSO\n")
	b.WriteString(`\fBlegion\fR(1), \fBlegion\-install\fR(1), \fBlegion\-doctor\fR(1), \fBsystemd.resource\-control\fR(5), \fBsystemd.service\fR(5)` + "\n")
	return File{Path: "man5/legion.toml.5", Data: []byte(b.String())}
}

// tables lists the schema's tables in the order they first appear.
func tables(schema []config.Setting) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range schema {
		if !seen[s.Table] {
			seen[s.Table] = true
			out = append(out, s.Table)
		}
	}
	return out
}

// sectionTitle names a table's subsection; team keys live in [defaults]
// too.
func sectionTitle(table string) string {
	title := "[" + roffText(table) + "]"
	if table == config.TableTeam {
		title += " and [defaults]"
	}
	return title
}

// settingFacts is the parenthesised line after a key: type, default, and
// whether it is per team only.
func settingFacts(s config.Setting) string {
	facts := []string{roffText(s.Type)}
	if s.Default != "" {
		facts = append(facts, "default "+bold(s.Default))
	} else {
		facts = append(facts, "unset by default")
	}
	if s.PerTeam {
		facts = append(facts, "per team only, not in [defaults]")
	}
	return strings.Join(facts, "; ")
}

// thArg makes s safe inside a double-quoted .TH argument.
func thArg(s string) string {
	return strings.ReplaceAll(roffText(s), `"`, `\(dq`)
}
