package instructions

import (
	"fmt"
	"strings"
)

// Skills are the built-in instructions as Claude Code skills, for people
// who run agents by hand (`legion install --skills`): legion-worker (a
// router, and one workflow file per phase) and legion-controller. They
// are rendered from the same templates as what Legion tells its agents,
// with <team> and <issue> where a dispatched agent gets the literal ids.
// The map's keys are paths relative to a skills directory.
func Skills() (map[string][]byte, error) {
	s, err := Load("")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	d := Data{Team: "<team>", Issue: "<issue>", Branch: "legion/<issue>", Worktree: "<the issue's worktree>",
		Base: "<the default branch>", Review: "local", AskTool: true, Legion: "legion"}
	var router strings.Builder
	router.WriteString(`---
name: legion-worker
description: Do one phase of work on one Legion issue (plan, implement, review, retro or finish) and record it on the issue. Use when you are asked to work on a Legion issue in one of those modes.
---

# Legion worker

Legion tells the agents it dispatches exactly these instructions, with the
team and issue filled in. Run by hand, replace <team> and <issue> with the
team and issue your prompt names, and follow the workflow of your mode:

| mode | workflow |
|---|---|
`)
	for _, mode := range Modes {
		d.Mode = mode
		text, err := s.Render(d)
		if err != nil {
			return nil, err
		}
		files["legion-worker/workflows/"+mode+".md"] = []byte(text)
		fmt.Fprintf(&router, "| %s | [workflows/%s.md](workflows/%s.md) |\n", mode, mode, mode)
	}
	files["legion-worker/SKILL.md"] = []byte(router.String())
	d.Mode, d.Issue = ModeController, ""
	text, err := s.Render(d)
	if err != nil {
		return nil, err
	}
	files["legion-controller/SKILL.md"] = []byte(`---
name: legion-controller
description: Run one Legion team's backlog: read legion state, apply the suggested actions, escalate what needs a person. Use when you are a Legion team's controller agent.
---

` + text)
	return files, nil
}
