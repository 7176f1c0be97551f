package docs

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// PageOptions are what every generated page's .TH line carries besides its
// name and section, and what legion(1) adds to the sections every command
// page has.
type PageOptions struct {
	// Source is the footer's left part, e.g. "Legion 1.2.0".
	Source string
	// Manual is the header's centre, e.g. "Legion Manual".
	Manual string
	// Date is the page's date (only month and year are shown). Callers
	// pass SOURCE_DATE_EPOCH's time for reproducible builds.
	Date time.Time
	// RootSections are added to the root command's page after its
	// options, e.g. EXIT STATUS, ENVIRONMENT and FILES.
	RootSections []Section
	// RootSeeAlso are pages the root command's SEE ALSO names besides its
	// subcommands, e.g. "legion.toml(5)".
	RootSeeAlso []string
}

// Section is one section of a page.
type Section struct {
	Title string // e.g. "EXIT STATUS"
	// Text is plain text as in a command's Long: paragraphs separated by
	// blank lines, indented lines kept as they are, `backquoted` spans
	// set in bold.
	Text string
	// Items follow Text as a list of tagged paragraphs.
	Items []Item
}

// Item is one tagged paragraph, e.g. an exit code and its meaning. Both
// may hold `backquoted` spans.
type Item struct {
	Tag, Text string
}

// CommandPages generates a section 1 page for root and for each available
// (not hidden, not deprecated) command below it, named as cobra/doc names
// them: legion(1), legion-install(1), legion-team-add(1), and so on. Each
// page has NAME, SYNOPSIS, DESCRIPTION (the command's Long, else Short),
// OPTIONS, GLOBAL OPTIONS (flags inherited from parents), EXAMPLES (if the
// command has some) and SEE ALSO (parent and subcommands); the root page
// also has o.RootSections. Pages are sorted by path.
//
// Commands' texts are plain text, not markdown: what `legion CMD --help`
// shows is what the page says.
func CommandPages(root *cobra.Command, o PageOptions) ([]File, error) {
	var files []File
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		files = append(files, File{Path: "man1/" + dashed(c) + ".1", Data: commandPage(c, o, c == root)})
		for _, sub := range available(c) {
			visit(sub)
		}
	}
	visit(root)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for i := 1; i < len(files); i++ {
		if files[i].Path == files[i-1].Path {
			return nil, fmt.Errorf("man pages: two commands make the page %s", files[i].Path)
		}
	}
	return files, nil
}

// commandPage renders one command's page.
func commandPage(c *cobra.Command, o PageOptions, isRoot bool) []byte {
	c.InitDefaultHelpFlag()
	var b strings.Builder
	fmt.Fprintf(&b, ".TH \"%s\" \"1\" \"%s\" \"%s\" \"%s\"\n", thArg(strings.ToUpper(dashed(c))),
		o.Date.UTC().Format("Jan 2006"), thArg(o.Source), thArg(o.Manual))
	b.WriteString(".nh\n.ad l\n")
	b.WriteString(".SH NAME\n" + roffCode(dashed(c)) + ` \- ` + roffText(c.Short) + "\n")

	b.WriteString(".SH SYNOPSIS\n" + synopsis(c) + "\n")

	b.WriteString(".SH DESCRIPTION\n")
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	b.WriteString(plainText(desc))
	if subs := available(c); len(subs) > 0 {
		b.WriteString(".SH COMMANDS\n")
		for _, sub := range subs {
			b.WriteString(".TP\n" + bold(sub.Name()) + "\n" + roffText(sub.Short) + "\n")
		}
	}

	writeFlags(&b, "OPTIONS", c.NonInheritedFlags())
	writeFlags(&b, "GLOBAL OPTIONS", c.InheritedFlags())

	if c.Example != "" {
		b.WriteString(".SH EXAMPLES\n" + preformatted(strings.Split(strings.Trim(c.Example, "\n"), "\n")))
	}
	if isRoot {
		for _, s := range o.RootSections {
			fmt.Fprintf(&b, ".SH %s\n", sectionArg(s.Title))
			if s.Text != "" {
				b.WriteString(plainText(s.Text))
			}
			for _, it := range s.Items {
				b.WriteString(".TP\n" + roffInline(it.Tag) + "\n" + roffInline(it.Text) + "\n")
			}
		}
	}

	var refs []string
	if c.HasParent() {
		refs = append(refs, pageRef(dashed(c.Parent())+"(1)"))
	}
	for _, sub := range available(c) {
		refs = append(refs, pageRef(dashed(sub)+"(1)"))
	}
	if isRoot {
		for _, r := range o.RootSeeAlso {
			refs = append(refs, pageRef(r))
		}
	}
	if len(refs) > 0 {
		b.WriteString(".SH SEE ALSO\n" + strings.Join(refs, ", ") + "\n")
	}
	return []byte(b.String())
}

// available lists the subcommands that get pages, by name.
func available(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
			out = append(out, sub)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// synopsis is the command's use line: the command path in bold, the rest
// as written in Use.
func synopsis(c *cobra.Command) string {
	path := bold(c.CommandPath())
	if !c.Runnable() && len(available(c)) > 0 {
		return path + ` [\fIflags\fR] \fICOMMAND\fR ...`
	}
	_, rest, _ := strings.Cut(c.Use, " ")
	line := path
	if rest != "" {
		line += " " + roffCode(rest)
	}
	if c.HasAvailableFlags() && !strings.Contains(rest, "[flags]") && !c.DisableFlagsInUseLine && !strings.Contains(rest, "[-") {
		line += ` [\fIflags\fR]`
	}
	return line
}

// writeFlags writes a section listing the visible flags of fs.
func writeFlags(b *strings.Builder, title string, fs *pflag.FlagSet) {
	if !fs.HasAvailableFlags() {
		return
	}
	b.WriteString(".SH " + title + "\n")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		varname, usage := pflag.UnquoteUsage(f)
		tag := ""
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			tag = bold("-"+f.Shorthand) + ", "
		}
		tag += bold("--" + f.Name)
		if varname != "" {
			if f.NoOptDefVal != "" {
				tag += "[=" + italic(varname) + "]"
			} else {
				tag += " " + italic(varname)
			}
		}
		b.WriteString(".TP\n" + tag + "\n" + roffInline(usage))
		if showDefault(f) {
			b.WriteString(" (default: " + bold(f.DefValue) + ")")
		}
		b.WriteString("\n")
	})
}

// showDefault reports whether a flag's default says something: zero values
// are left out, as cobra's help leaves them out.
func showDefault(f *pflag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s", "[]":
		return false
	}
	return true
}

// plainText renders cobra-style text: blank lines separate paragraphs,
// runs of indented lines are kept as they are (examples, lists), other
// lines of a paragraph flow together.
func plainText(s string) string {
	var b strings.Builder
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i := 0; i < len(lines); {
		line := lines[i]
		switch {
		case strings.TrimSpace(line) == "":
			i++
		case line[0] == ' ' || line[0] == '\t':
			j := i
			for j < len(lines) && strings.TrimSpace(lines[j]) != "" && (lines[j][0] == ' ' || lines[j][0] == '\t') {
				j++
			}
			b.WriteString(preformatted(lines[i:j]))
			i = j
		default:
			j := i
			for j < len(lines) && strings.TrimSpace(lines[j]) != "" && lines[j][0] != ' ' && lines[j][0] != '\t' {
				j++
			}
			b.WriteString(".PP\n" + roffInline(strings.Join(lines[i:j], " ")) + "\n")
			i = j
		}
	}
	return b.String()
}

// preformatted sets lines as they are (common indentation removed),
// indented, in no-fill mode.
func preformatted(lines []string) string {
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	var b strings.Builder
	b.WriteString(".PP\n.RS 4\n.nf\n")
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			b.WriteString(".sp\n")
			continue
		}
		b.WriteString(roffCode(strings.TrimRight(l[indent:], " \t")) + "\n")
	}
	b.WriteString(".fi\n.RE\n")
	return b.String()
}

// pageRef renders "name(5)" with the name in bold.
func pageRef(ref string) string {
	name, section, ok := strings.Cut(ref, "(")
	if !ok {
		return bold(ref)
	}
	return bold(name) + "(" + roffText(section)
}

// sectionArg makes a section title safe as the argument of .SH.
func sectionArg(title string) string {
	return `"` + strings.ReplaceAll(roffText(title), `"`, `\(dq`) + `"`
}

// dashed is the page name of a command: its path with dashes.
func dashed(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "-")
}
