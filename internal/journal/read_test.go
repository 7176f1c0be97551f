package journal

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseEntry(t *testing.T) {
	tests := []struct {
		name, line string
		want       Entry
		err        string // a substring of the error; "" for none
	}{{
		name: "worker",
		line: `{"__CURSOR":"s=1;i=2","__REALTIME_TIMESTAMP":"1795570971395498","PRIORITY":"6","_PID":"42","_SYSTEMD_USER_UNIT":"legion-0a1b2c3d-web-1-implement.service","_SYSTEMD_UNIT":"user@1000.service","SYSLOG_IDENTIFIER":"legion-pty-worker","_COMM":"legion-pty-work","MESSAGE":"agent started","LEGION_TEAM":"web","LEGION_ISSUE":"WEB-1","LEGION_MODE":"implement","LEGION_SESSION":"0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c","LEGION_UNIT":"legion-0a1b2c3d-web-1-implement.service"}`,
		want: Entry{
			Time: time.UnixMicro(1795570971395498), Cursor: "s=1;i=2", Priority: 6, PID: 42,
			Unit: "legion-0a1b2c3d-web-1-implement.service", Ident: "legion-pty-worker", Message: "agent started",
			Team: "web", Issue: "WEB-1", Mode: "implement", Session: "0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c",
			About: "legion-0a1b2c3d-web-1-implement.service",
		},
	}, {
		// journald read no cgroup for the sender: the worker had exited.
		name: "worker line without the trusted unit",
		line: `{"__REALTIME_TIMESTAMP":"2","_PID":"42","SYSLOG_IDENTIFIER":"legion-pty-worker","MESSAGE":"agent ended","LEGION_TEAM":"web","LEGION_UNIT":"legion-0a1b2c3d-web-1-implement.service"}`,
		want: Entry{
			Time: time.UnixMicro(2), Priority: 6, PID: 42, Unit: "legion-0a1b2c3d-web-1-implement.service", Ident: "legion-pty-worker",
			Message: "agent ended", Team: "web", About: "legion-0a1b2c3d-web-1-implement.service",
		},
	}, {
		name: "helper line without the trusted unit",
		line: `{"__REALTIME_TIMESTAMP":"3","SYSLOG_IDENTIFIER":"legion","MESSAGE":"spawn","LEGION_UNIT":"legion-0a1b2c3d-web-1-implement.service"}`,
		want: Entry{Time: time.UnixMicro(3), Priority: 6, Ident: "legion", Message: "spawn", About: "legion-0a1b2c3d-web-1-implement.service"},
	}, {
		name: "byte arrays, repeated fields, null, no priority",
		line: `{"__REALTIME_TIMESTAMP":"1","MESSAGE":[104,105,10,255],"LEGION_TEAM":["web","web"],"LEGION_ISSUE":[[87,45,49],"x"],"LEGION_MODE":null,"_SYSTEMD_UNIT":"legion.service","_COMM":"legion"}`,
		want: Entry{Time: time.UnixMicro(1), Priority: 6, Unit: "legion.service", Ident: "legion", Message: "hi\n\xff", Team: "web", Issue: "W-1"},
	}, {
		name: "no time", line: `{"MESSAGE":"x"}`, err: "__REALTIME_TIMESTAMP",
	}, {
		name: "bad priority", line: `{"__REALTIME_TIMESTAMP":"1","PRIORITY":"9"}`, err: "PRIORITY",
	}, {
		name: "number value", line: `{"__REALTIME_TIMESTAMP":"1","MESSAGE":5}`, err: "field MESSAGE",
	}, {
		name: "byte out of range", line: `{"__REALTIME_TIMESTAMP":"1","MESSAGE":[256]}`, err: "array of bytes",
	}, {
		name: "not an object", line: `["x"]`, err: "journal entry",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEntry([]byte(tt.line))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseEntry(%s) = %v, %v; want an error with %q", tt.line, got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEntry(%s): %v", tt.line, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseEntry(%s) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

// FuzzParseEntry: any line either parses or is an error that says it is
// about a journal entry; never a panic.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{
		`{"__REALTIME_TIMESTAMP":"1795570971395498","MESSAGE":"x","LEGION_TEAM":"web"}`,
		`{"__REALTIME_TIMESTAMP":"1","MESSAGE":[104,105],"LEGION_ISSUE":[[87],"x"],"LEGION_MODE":null}`,
		`{"__REALTIME_TIMESTAMP":"1","PRIORITY":"3","_PID":"7"}`,
		`{}`, `[]`, `null`, `{"MESSAGE":[[[[]]]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if _, err := ParseEntry(line); err != nil && !strings.HasPrefix(err.Error(), "journal entry") {
			t.Errorf("ParseEntry(%q): %v; want an error that starts with \"journal entry\"", line, err)
		}
	})
}

func TestQueryArgs(t *testing.T) {
	tests := []struct {
		q    Query
		want string
	}{
		{Query{Team: "web", UID: 1000}, "--output=json --all --no-pager --quiet _UID=1000 LEGION_TEAM=web"},
		{Query{Team: "web", Issue: "WEB-1", UID: 1000, Follow: true}, "--output=json --all --no-pager --quiet --no-tail --follow _UID=1000 LEGION_TEAM=web LEGION_ISSUE=WEB-1"},
		{Query{Team: "web", Unit: "legion-0a1b2c3d-WEB\\x2d1-plan.service", UID: 1000, Lines: 50}, "--output=json --all --no-pager --quiet --lines=50 _UID=1000 LEGION_TEAM=web LEGION_UNIT=legion-0a1b2c3d-WEB\\x2d1-plan.service"},
		{Query{Team: "web", UID: 0, Lines: 20, Follow: true}, "--output=json --all --no-pager --quiet --lines=20 --follow _UID=0 LEGION_TEAM=web"},
		// After wins over Lines: the entries since.
		{Query{Team: "web", UID: 1000, Lines: 20, After: "s=1;i=2"}, "--output=json --all --no-pager --quiet --after-cursor=s=1;i=2 _UID=1000 LEGION_TEAM=web"},
	}
	for _, tt := range tests {
		if got := strings.Join(tt.q.Args(), " "); got != tt.want {
			t.Errorf("%+v.Args() = %s; want %s", tt.q, got, tt.want)
		}
	}
}

func TestValidCursor(t *testing.T) {
	for _, c := range []string{
		"s=739ad463348b4ceca5a9e69c95a3c93f;i=4ece7;b=6c7c6013a8674ab39b9e1e7fd2a4f2e1;m=a5b6c7;t=5e8c0a1b2c3d4;x=f2d1c0b9a8e7d6c5",
		"s=1;i=2",
	} {
		if !ValidCursor(c) || CheckCursor(c) != nil {
			t.Errorf("ValidCursor(%q) = false (%v); want true", c, CheckCursor(c))
		}
	}
	for _, c := range []string{"", "s", "s=", "=1", "s=1;", "s=1;;i=2", "ss=1", "s=1 i=2", "s=x", "--lines=5", "s=1\ni=2", strings.Repeat("s=1;", 70) + "i=2"} {
		if ValidCursor(c) {
			t.Errorf("ValidCursor(%q) = true; want false", c)
		}
		if err := CheckCursor(c); err == nil || !strings.Contains(err.Error(), "journal cursor") {
			t.Errorf("CheckCursor(%q) = %v; want an error saying what a cursor looks like", c, err)
		}
	}
}

// FuzzValidCursor: whatever ValidCursor lets through is one journalctl
// argument that cannot be read as another option or a match: no dash at
// its start, no space, '=' or '+' outside its key=value pairs.
func FuzzValidCursor(f *testing.F) {
	for _, c := range []string{"s=1;i=2", "--lines=5", "s=1;;i=2", "s=x", ""} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		if !ValidCursor(c) {
			return
		}
		if len(c) > 256 || strings.HasPrefix(c, "-") || strings.ContainsAny(c, " \t\r\n+_/") {
			t.Fatalf("ValidCursor(%q) = true", c)
		}
		for _, kv := range strings.Split(c, ";") {
			if k, v, _ := strings.Cut(kv, "="); len(k) != 1 || v == "" || strings.Contains(v, "=") {
				t.Fatalf("ValidCursor(%q) = true: pair %q", c, kv)
			}
		}
	})
}
