package ptyworker

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// envTestDialog makes the test binary fakeDialog (see TestMain).
const envTestDialog = "LEGION_TEST_DIALOG"

// fakeDialog draws one of Claude Code 2.1.330's dialogs on a terminal in
// raw mode and takes keys as it does (FACTS F3c, F3e, F3g): kind is
// "question:N" (one question of N options, then "Type something."),
// "questions" (several) or "permission". A digit picks an option
// ("answered-option:D"), but the digit of "Type something." only moves
// the focus there; typed text then replaces its label and Enter submits
// it ("answered:TEXT"). Esc declines ("declined"). Keys that arrive in one
// write, outside the text field, are a paste: Claude Code records option
// 1 then. It prints its result on a cleared screen and returns.
func fakeDialog(kind string) {
	out := func(format string, args ...any) { fmt.Fprintf(os.Stdout, format, args...) }
	options := 0
	if n, ok := strings.CutPrefix(kind, "question:"); ok {
		options, _ = strconv.Atoi(n)
		kind = "question"
	}
	draw := func(field string) {
		out("\x1b[2J\x1b[H")
		switch kind {
		case "question":
			out(" ☐ Go\r\nProceed?\r\n")
			for i := 1; i <= options; i++ {
				out("  %d. option %d\r\n", i, i)
			}
			out("%s\r\n  %d. Chat about this\r\nEnter to select · ↑/↓ to navigate · Esc to cancel\r\n", field, options+2)
		case "questions":
			out("←  ☐ Colour  ☐ Size  ✔ Submit  →\r\nColour?\r\n❯ 1. Red\r\nEnter to select · Tab/Arrow keys to navigate · Esc to cancel\r\n")
		case "gemini":
			out("? Shell 'legion' issue show ENG-1\r\nAllow execution of [Shell]?\r\n● 1. Allow once\r\n  2. Allow for this session\r\n  3. No, suggest changes (esc)\r\n")
		default:
			out("Bash command\r\nDo you want to proceed?\r\n❯ 1. Yes\r\n  2. Yes, and always allow\r\n  3. No\r\nEsc to cancel · Tab to amend\r\n")
		}
	}
	done := func(result string) { out("\x1b[2J\x1b[H%s\r\n", result) }
	typeHere := fmt.Sprintf("  %d. Type something.", options+1)
	draw(typeHere)
	typing := false
	var text []byte
	buf := make([]byte, 256)
	for {
		n, err := os.Stdin.Read(buf)
		if err != nil {
			return
		}
		in := buf[:n]
		if !typing {
			switch {
			case len(in) > 1:
				done("answered-option:1")
				return
			case in[0] == 0x1b:
				done("declined")
				return
			case kind == "question" && string(in) == strconv.Itoa(options+1):
				typing = true
				draw(fmt.Sprintf("❯\u00a0%d. Type something.", options+1))
				continue
			case in[0] >= '1' && in[0] <= '9':
				done("answered-option:" + string(in))
				return
			}
			continue
		}
		for _, b := range in {
			if b == '\r' {
				done("answered:" + string(text))
				return
			}
			text = append(text, b)
		}
		draw(fmt.Sprintf("❯\u00a0%d. %s", options+1, text))
	}
}
