package claudecode

import "bytes"

// referencePending is the straightforward reading of PendingQuestion's rule:
// parse every line front to back and keep the pending questions of the
// current assistant message. The fuzz target checks the backward, chunked
// scan against it.
func referencePending(data []byte, maxLine int) (Question, bool) {
	var (
		inMessage bool
		msgID     string
		pending   []Question
	)
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) > maxLine {
			continue
		}
		e, ok := decodeLine(line)
		if !ok {
			continue
		}
		switch e.Type {
		case "user":
			for _, b := range e.Message.Content {
				if !b.isAnswer() {
					continue
				}
				kept := pending[:0]
				for _, q := range pending {
					if q.ToolUseID != b.ToolUseID {
						kept = append(kept, q)
					}
				}
				pending = kept
			}
		case "assistant":
			if !inMessage || e.Message.ID != msgID {
				pending = nil
			}
			inMessage, msgID = true, e.Message.ID
			for _, b := range e.Message.Content {
				if b.isQuestion() {
					pending = append(pending, question(e, b))
				}
			}
		}
	}
	if len(pending) == 0 {
		return Question{}, false
	}
	return pending[0], true
}
