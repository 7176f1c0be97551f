package scripted

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Step kinds.
const (
	stepSay      = "say"
	stepWork     = "work"
	stepSubagent = "subagent"
	stepAsk      = "ask"
	stepRun      = "run"
	stepBash     = "bash"
	stepAPIError = "apierror"
	stepPermNote = "permission-notify"
	stepIdleNote = "idle-notify"
	stepTick     = "tick"
	stepSleep    = "sleep"
	stepHang     = "hang"
	stepCrash    = "crash"
	stepExit     = "exit"
)

// step is one parsed script line.
type step struct {
	line  int    // 1-based line in the script
	conds []cond // all must hold
	kind  string
	text  string // say: the text; ask: the question; the raw argument otherwise

	questions []askQuestion  // ask
	words     []string       // run: argv before expansion
	dur       time.Duration  // work, subagent, tick, sleep, permission-notify, idle-notify
	code      int            // crash, exit
	signal    syscall.Signal // crash with a signal
	errKind   string         // apierror: the error type; text is the message
}

// askQuestion is one question of an ask step, before expansion.
type askQuestion struct {
	text, header string
	options      []string
}

// cond is one condition prefix of a line.
type cond struct {
	kind string // "if-new", "if-resumed", "if-prompt", "if-answer", "if-env", "if-denied", "if-allowed", "once"
	arg  string // if-prompt, if-answer: the word; if-env: NAME=VALUE
}

// parseScript parses script text (see the package documentation). Errors
// name the line and what was expected.
func parseScript(text string) ([]step, error) {
	var steps []step
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("script line %d %q: %w", i+1, line, err)
		}
		s.line = i + 1
		steps = append(steps, s)
	}
	return steps, nil
}

// parseLine parses one non-empty line: conditions, then a step.
func parseLine(line string) (step, error) {
	var s step
	rest := line
	for {
		word, after := cutWord(rest)
		switch word {
		case "if-new", "if-resumed", "if-denied", "if-allowed", "once":
			s.conds = append(s.conds, cond{kind: word})
			rest = after
			continue
		case "if-prompt", "if-answer", "if-env":
			arg, after2 := cutWord(after)
			if arg == "" {
				return step{}, fmt.Errorf("%s needs an argument", word)
			}
			if word == "if-env" && !strings.Contains(arg, "=") {
				return step{}, fmt.Errorf("if-env %q: want NAME=VALUE", arg)
			}
			s.conds = append(s.conds, cond{kind: word, arg: arg})
			rest = after2
			continue
		}
		s.kind, s.text = word, after
		break
	}
	switch s.kind {
	case "":
		return step{}, fmt.Errorf("conditions without a step")
	case stepSay:
		if s.text == "" {
			return step{}, fmt.Errorf("say needs text")
		}
	case stepAsk:
		forms := strings.Split(s.text, ";;")
		for i, form := range forms {
			parts := strings.Split(form, "|")
			q := askQuestion{text: strings.TrimSpace(parts[0]), header: "Question"}
			if len(forms) > 1 {
				q.header = fmt.Sprintf("Question %d", i+1)
			}
			for _, o := range parts[1:] {
				if o = strings.TrimSpace(o); o != "" {
					q.options = append(q.options, o)
				}
			}
			if q.text == "" {
				return step{}, fmt.Errorf("ask needs a question before each | and after each ;;")
			}
			if len(q.options) > 8 {
				return step{}, fmt.Errorf("ask %q: at most 8 options, so that each has a digit", q.text)
			}
			s.questions = append(s.questions, q)
		}
	case stepRun:
		words, err := splitWords(s.text)
		if err != nil {
			return step{}, err
		}
		if len(words) == 0 {
			return step{}, fmt.Errorf("run needs a command")
		}
		s.words = words
	case stepBash:
		if s.text == "" {
			return step{}, fmt.Errorf("bash needs a command")
		}
	case stepAPIError:
		kind, msg := cutWord(s.text)
		if !slices.Contains(apiErrorKinds, kind) {
			return step{}, fmt.Errorf("apierror %q: want one of %s", kind, strings.Join(apiErrorKinds, ", "))
		}
		s.errKind, s.text = kind, msg
	case stepWork, stepSubagent, stepTick, stepSleep, stepPermNote, stepIdleNote:
		d, err := time.ParseDuration(s.text)
		if err != nil || d < 0 || (s.kind == stepTick && d == 0) {
			return step{}, fmt.Errorf("%s %q: want a positive duration like 2s or 500ms", s.kind, s.text)
		}
		s.dur = d
	case stepHang:
		if s.text != "" {
			return step{}, fmt.Errorf("hang takes no argument")
		}
	case stepExit:
		code, err := exitCode(s.text)
		if err != nil {
			return step{}, err
		}
		s.code = code
	case stepCrash:
		if code, err := exitCode(s.text); err == nil {
			s.code = code
			break
		}
		sig := unix.SignalNum("SIG" + strings.TrimPrefix(strings.ToUpper(s.text), "SIG"))
		if sig == 0 {
			return step{}, fmt.Errorf("crash %q: want an exit code 0-255 or a signal name like KILL", s.text)
		}
		s.signal = sig
	default:
		return step{}, fmt.Errorf("unknown step %q: want say, work, subagent, ask, bash, run, apierror, tick, permission-notify, idle-notify, sleep, hang, crash or exit", s.kind)
	}
	return s, nil
}

// exitCode parses an exit code 0-255.
func exitCode(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 {
		return 0, fmt.Errorf("exit code %q: want 0-255", s)
	}
	return n, nil
}

// cutWord splits off the first space-separated word.
func cutWord(s string) (word, rest string) {
	s = strings.TrimSpace(s)
	word, rest, _ = strings.Cut(s, " ")
	return word, strings.TrimSpace(rest)
}

// splitWords splits a command line into words: spaces separate words,
// 'single' and "double" quotes group them (no escapes inside single quotes;
// \" and \\ inside double quotes). There is no other shell syntax.
func splitWords(s string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quote   byte
		escaped bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			cur.WriteByte(c)
			escaped = false
		case quote == '"' && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			escaped = true
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
