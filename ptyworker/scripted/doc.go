// Package scripted is a stand-in for Claude Code in tests and the demo: an
// agent that takes Claude's flags, writes a session file in Claude Code's
// format where Claude Code would, runs the hooks of its --settings file as
// Claude Code does, checks permissions and shows Claude Code's dialogs, and
// does what a small script says for each prompt. It behaves like the
// interactive CLI (2.1.330) in what Legion depends on, so fast tests
// exercise the paths the real one takes.
//
// It is test code (internal/layout's testOnly): only tests and a legion
// built with the demo tag link it, and it is run as
//
//	legion scripted-agent [--session-id ID | --resume ID] [--settings FILE]
//	    [--permission-mode MODE] [--allowedTools RULE...] [--] [PROMPT]
//
// Like Claude Code, --session-id starts a session whose file must not exist
// yet ("Error: Session ID ID is already in use.", exit 1), --resume
// continues one whose file must exist ("No conversation found with session
// ID: ID", exit 1; lines are appended), and with neither a random session ID
// is used. The session file is created once the first prompt is submitted
// and gets a line per finished message, as Claude Code's.
// --dangerously-skip-permissions is --permission-mode bypassPermissions;
// --allowedTools and --disallowedTools take every argument up to the next
// flag (put "--" before a prompt after them). Other Claude flags are
// accepted and ignored.
//
// # Turns and the prompt
//
// The script runs once per prompt: the command line's, then each line typed
// at the agent's prompt. A turn ends with the Stop hook (last_assistant_message
// is the turn's last say text, background_tasks the subagents still running)
// and the agent waits at its prompt ("> "): it does not exit at the end of
// a turn. When stdin is a terminal it is read key by key, as a TUI does:
// Enter submits the line, "/exit" + Enter ends the agent (exit 0, SessionEnd
// reason prompt_input_exit), the end of the input ends it too (exit 0,
// reason other). SIGINT ends it at once with exit 0, even mid-turn; SIGTERM
// with 143, SIGHUP with 129 (SessionEnd reason other, given at most its
// 1.5 s). Keys typed during a turn wait for the prompt. Keys that arrive in
// one read are a paste, as in Claude Code: a digit in them picks nothing
// in a dialog.
//
// # Script
//
// The script is the text of $LEGION_SCRIPT, or else the file named by
// $LEGION_SCRIPT_FILE; with neither, the agent says "Got it: PROMPT_TITLE". One
// step per line; blank lines and lines starting with # are skipped. A line
// may start with conditions, all of which must hold for its step to run:
//
//	if-new                  the session was started with --session-id (or none)
//	if-resumed              the session was started with --resume
//	if-prompt WORD          the current prompt's first line contains WORD
//	                        (Legion's instructions name their phase there:
//	                        "# Legion: plan DEMO-1 (team demo)")
//	if-answer WORD          the last question's answer contains WORD
//	if-denied               the last bash or ask step was denied or declined
//	if-allowed              it was not
//	if-env NAME=VALUE       the environment variable NAME is VALUE
//	once                    the step has not run in this session before
//	                        (across turns and resumes; keyed by the line number)
//
// Steps:
//
//	say TEXT                an assistant text message
//	bash COMMAND            a Bash tool call, checked against the permissions
//	                        (below), run with sh -c in the working directory;
//	                        a failing command is a failed tool call
//	                        (PostToolUseFailure) and the turn goes on
//	run CMD [ARG]...        runs CMD (argv, no shell; 'single' and "double"
//	                        quotes group words) as a Bash tool call that needs
//	                        no permission; a failure ends the agent with an
//	                        error (exit 1)
//	work DURATION           a Bash tool call that appends a progress line
//	                        every tick for DURATION (the scripted agent's
//	                        signs of life: Claude Code writes nothing while a
//	                        tool runs); needs no permission
//	subagent DURATION       an Agent tool call launched in the background, as
//	                        Claude Code's: SubagentStart, then the turn goes
//	                        on while the subagent writes
//	                        <session>/subagents/agent-<id>.jsonl every tick for
//	                        DURATION; then SubagentStop, and once the agent is
//	                        at its prompt, a turn for the completion notice
//	                        (UserPromptSubmit with a <task-notification>, the
//	                        reply "Subagent done.", Stop); the script does not
//	                        run for that turn
//	ask QUESTION [| OPTION]... [;; QUESTION [| OPTION]...]...
//	                        an AskUserQuestion tool call (options default to
//	                        Yes, No; at most 8); with ;; a form of several
//	                        questions; sets $ANSWER (below)
//	apierror KIND [TEXT]    the turn fails at the API as after Claude Code's
//	                        retries: a synthetic assistant message (TEXT, else
//	                        the real CLI's for KIND) and StopFailure instead of
//	                        Stop; KIND is rate_limit, authentication_failed,
//	                        billing_error, invalid_request, server_error,
//	                        max_output_tokens or unknown
//	tick DURATION           the interval of work and subagent (default 200ms)
//	permission-notify DURATION
//	                        when Notification permission_prompt fires after a
//	                        dialog opens (default 6s, as Claude Code)
//	idle-notify DURATION    when Notification idle_prompt fires after a turn
//	                        ends (default 60s, as Claude Code)
//	sleep DURATION          writes nothing for DURATION
//	hang                    writes nothing, until a signal ends the agent
//	crash CODE|SIGNAL       ends at once with exit code CODE, or killed by
//	                        SIGNAL (e.g. KILL, SEGV); no hooks
//	exit CODE               ends the agent with exit code CODE (SessionEnd,
//	                        no Stop): for tests that need an agent that exits
//
// Arguments may use $NAME and ${NAME}: PROMPT, PROMPT_TITLE (the prompt's
// first line), SESSION_ID, ANSWER, CWD and RESUMED ("1" or "") are the
// agent's own, anything else comes from the
// environment (the pty-worker sets LEGION_TEAM, LEGION_ISSUE, LEGION_MODE,
// LEGION_SESSION). A script with an unknown step or a bad argument is
// rejected, naming the line, before anything is written.
//
// # Hooks (--settings FILE)
//
// The settings file is Claude Code's JSON; the agent reads hooks and
// permissions and ignores the rest. A malformed file, a command hook
// without a command, a timeout that is not a positive number of seconds, a
// bad matcher or rule is an error naming the file and the key. For each
// event, every command hook of every entry whose matcher matches (the tool
// name; the notification type, source, reason or error for the events that
// have one; "" and "*" match all; Edit|Write or a regular expression) runs
// at once with /bin/sh -c in the working directory, in its own process
// group, with the agent's environment plus CLAUDE_PROJECT_DIR, the event's
// JSON payload on stdin, until it ends or its timeout (default 10 minutes;
// 30 s for UserPromptSubmit, 1.5 s for SessionEnd) kills it. Payloads have
// session_id, transcript_path, cwd and hook_event_name and the fields of
// the real CLI's for SessionStart (source startup/resume), UserPromptSubmit,
// PreToolUse, PostToolUse, PostToolUseFailure, PermissionRequest (no
// tool_use_id), Notification (permission_prompt, idle_prompt), Stop,
// StopFailure (error, last_assistant_message), SubagentStart, SubagentStop
// and SessionEnd. Only a PermissionRequest hook's output is used: its
// {"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":
// {"behavior":"allow"|"deny","message":...,"updatedInput":...}}}. Other
// hook output and exit codes only get a line on the terminal.
//
// # Permissions
//
// A bash step is allowed when every part of the command (split at &&, ||,
// ;, | and newlines outside quotes) is allowed by a permissions.allow rule
// or --allowedTools ("Bash", "Bash(git:*)": git alone or with arguments,
// "Bash(npm run *)": * matches anything, "Bash(make test)": exactly that)
// or is one of a few read-only commands (echo, ls, cat, git status, ...),
// and no permissions.ask rule matches; a deny rule or --disallowedTools on
// any part denies it. The mode (--permission-mode, else
// permissions.defaultMode, else "auto"; "manual" is reported as "default")
// changes that: bypassPermissions allows all but denied commands, dontAsk
// denies what is not allowed. A denied call is told why (tool_result
// is_error, toolDenialKind permission-rule) and the turn goes on.
//
// Otherwise the call asks: PermissionRequest fires, and at once the dialog
// shows ("Do you want to proceed?", 1. Yes, 2. Yes, and don't ask again for
// PREFIX commands in CWD, 3. Yes, and switch to auto mode, 4. No; "Esc to
// cancel · Tab to amend"), and whichever decides first counts: the hook
// (allow runs the command; deny tells the agent the message and the turn
// goes on) or a key (a digit picks at once, Up/Down + Enter pick, Enter
// alone is Yes, Esc is No), which kills a hook still held. No writes the
// rejected tool_result and "[Request interrupted by user for tool use]" and
// ends the turn without Stop, as Claude Code; the next line typed is a
// prompt. Option 2 allows "PREFIX *" for the rest of the session.
// Notification permission_prompt fires while it waits (permission-notify).
//
// # Questions
//
// An ask step fires PreToolUse and PermissionRequest (no
// permission_suggestions). Keys typed before the dialog shows (until the
// hook ends, or 300 ms) go to the prompt, and Enter submits them as a
// prompt queued for after the turn (UserPromptSubmit fires at once), as in
// Claude Code. The dialog then shows the options numbered, then "Type
// something." and "Chat about this", and "Enter to select · ↑/↓ to navigate
// · Esc to cancel" ("Tab/Arrow keys" for a form). A digit picks its option
// at once; the digit of "Type something." moves there, text typed there is
// the answer and Enter submits it; Up/Down and Enter pick the highlighted
// option; other typed text picks nothing, so text + Enter records option 1,
// as in Claude Code; Esc or "Chat about this" declines (rejected
// tool_result, interruption, no Stop; the next line typed is a prompt). A
// form asks its questions in turn, then "Ready to submit your answers?"
// (1. Submit answers, 2. Cancel). A PermissionRequest hook still held while
// the dialog is open may answer with allow and updatedInput (questions
// echoed back, answers: question → answer): the dialog closes and those
// are the answers (a question left out stays unanswered; without
// questions the call is denied by Claude Code's schema check, and the turn
// goes on); deny declines with its message; allow alone leaves the dialog
// to the keys. The tool_result is Claude Code's: "Your
// questions have been answered: "Q"="A". ..." for picked options, "The user
// answered: "Q"="A". Read the answers carefully ..." when any answer was
// typed or came from the hook; toolUseResult.answers maps question to
// answer, and PostToolUse carries the answers in tool_input and
// tool_response.
//
// # Where it is
//
// Every step is announced on the terminal as "legion-scripted: step N:
// STEP" (N is the script line, STEP with its arguments expanded), and
// recorded in the session file as a system line with subtype
// "legion_script_step" and content "N: STEP"; a turn's end is "legion-scripted:
// turn ended" and a turn_duration system line. These extra lines are the
// only writes Claude Code would not make.
//
// Not imitated: the real TUI's screen, the auto-mode gateway dialog,
// multiSelect questions, hook output other than PermissionRequest
// decisions (PreToolUse decisions, Stop blocking, exit code 2), keys lost
// right after the TUI changes state, ~/.claude/sessions/<pid>.json.
//
// The package never touches files other than its own session and subagent
// files, except through the commands and hooks a script and its settings
// run.
package scripted
