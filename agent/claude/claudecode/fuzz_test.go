package claudecode

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzPendingQuestion feeds arbitrary bytes as a session file, read back
// with arbitrary chunk and line-size limits: the scan must not panic and
// must agree with the forward reference parse.
func FuzzPendingQuestion(f *testing.F) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range fixtures {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		// The last few lines carry each case; small seeds keep the
		// fuzzer's minimisation quick.
		if i := lastLines(data, 3); i > 0 {
			data = data[i:]
		}
		f.Add(data, uint16(64), uint16(4096))
		f.Add(data, uint16(1), uint16(300))
	}
	f.Add([]byte(`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"AskUserQuestion","input":{}}]}}`+"\n"+
		`{"type":"\u0075ser","message":{"content":[{"type":"tool\u005fresult","tool_use_id":"t"}]}}`), uint16(3), uint16(50))
	f.Add([]byte("\n\n\n{}\n[]\nnull\n"), uint16(2), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk, maxLine uint16) {
		c := int(chunk%512) + 1
		m := int(maxLine)
		q, waiting, err := scanPending(bytes.NewReader(data), int64(len(data)), c, m)
		if err != nil {
			t.Fatalf("scanPending: %v", err)
		}
		refQ, refWaiting := referencePending(data, m)
		if waiting != refWaiting {
			t.Fatalf("scanPending(chunk %d, maxLine %d) waiting = %v; reference says %v", c, m, waiting, refWaiting)
		}
		if diff := cmp.Diff(refQ, q); diff != "" {
			t.Fatalf("scanPending(chunk %d, maxLine %d) question differs from reference (-ref +scan):\n%s", c, m, diff)
		}
	})
}

// lastLines is the offset where the last n lines of data begin.
func lastLines(data []byte, n int) int {
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	for ; n > 0; n-- {
		i := bytes.LastIndexByte(data[:end], '\n')
		if i < 0 {
			return 0
		}
		end = i
	}
	return end + 1
}
