// Package scripted is a stand-in for Claude Code in tests and the demo: an
// agent that takes Claude's session flags, writes a session file in Claude
// Code's format where Claude Code would, and does what a small script says:
// talk, work (keeping its session file fresh), run a subagent, ask the human a
// question and wait for the answer on its terminal, run commands, hang, crash
// or exit.
//
// It is run as `legion scripted-agent [--session-id ID | --resume ID] [PROMPT]`.
// Like Claude Code, --session-id starts a session whose file must not exist
// yet, --resume continues one whose file must exist (appending to it), and
// with neither a random session ID is used. Other Claude flags are accepted
// and ignored.
//
// # Script
//
// The script is the text of $LEGION_SCRIPT, or else the file named by
// $LEGION_SCRIPT_FILE; with neither, the agent says it got the prompt and
// exits 0. One step per line; blank lines and lines starting with # are
// skipped. A line may start with conditions, all of which must hold for its
// step to run:
//
//	if-new                  the session was started with --session-id (or none)
//	if-resumed              the session was started with --resume
//	if-prompt WORD          the prompt contains WORD
//	if-env NAME=VALUE       the environment variable NAME is VALUE
//	once                    the step has not run in this session before
//	                        (across resumes; keyed by the line number)
//
// Steps:
//
//	say TEXT                an assistant text message
//	work DURATION           a Bash tool call that appends a progress line
//	                        every tick for DURATION, keeping the file fresh
//	subagent DURATION       a Task tool call whose subagent writes
//	                        <session>/subagents/agent-<id>.jsonl every tick
//	                        for DURATION; the session file itself is quiet
//	ask QUESTION [| OPTION]...
//	                        an AskUserQuestion tool call; prints the question,
//	                        reads one line from the terminal, writes the answer
//	                        as its tool_result and sets $ANSWER
//	run CMD [ARG]...        runs CMD in the working directory (argv, no shell;
//	                        'single' and "double" quotes group words) and
//	                        records it as a Bash tool call; a failure ends the
//	                        agent with an error
//	tick DURATION           the interval of work and subagent (default 200ms)
//	sleep DURATION          writes nothing for DURATION
//	hang                    writes nothing, forever (until killed)
//	crash CODE|SIGNAL       ends at once with exit code CODE, or killed by
//	                        SIGNAL (e.g. KILL, SEGV)
//	exit CODE               ends with exit code CODE
//
// At the end of the script the agent exits 0. Arguments may use $NAME and
// ${NAME}: PROMPT, SESSION_ID, ANSWER, CWD and RESUMED ("1" or "") are the
// agent's own, anything else comes from the environment (the pty-worker sets
// LEGION_TEAM, LEGION_ISSUE, LEGION_MODE, LEGION_SESSION). A script with an
// unknown step or a bad argument is rejected, naming the line, before
// anything is written.
//
// # Where it is
//
// Every step is announced on stdout as "legion-scripted: step N: STEP"
// (N is the script line, STEP with its arguments expanded), and recorded in
// the session file as a system line with subtype "legion_script_step" and
// content "N: STEP". A question is printed as "legion-scripted: question: ..."
// followed by the prompt "legion-scripted: answer> ".
//
// The package never touches files other than its own session and subagent
// files, except through the commands a script runs.
package scripted
