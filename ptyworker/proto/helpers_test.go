package proto_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// shortTempDir is a temporary directory with a short path, for sockets
// (sun_path holds 108 bytes).
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "lp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// testSpec is a valid spec running argv in temp dirs.
func testSpec(t testing.TB, argv ...string) *proto.Spec {
	t.Helper()
	root := shortTempDir(t)
	tok, err := proto.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return &proto.Spec{
		Version:          proto.SpecVersion,
		SessionID:        uuid.NewString(),
		Name:             "test-session",
		Team:             "testteam",
		TeamShort:        "0123abcd",
		Issue:            "ENG-1",
		Mode:             "implement",
		Role:             "worker",
		Cwd:              root,
		ArgvNew:          argv,
		Token:            tok,
		DaemonInstanceID: "daemon-test",
		Paths:            proto.Paths{RuntimeDir: filepath.Join(root, "run"), StateDir: filepath.Join(root, "state")},
		Unit:             "legion-0123abcd-ENG\\x2d1-implement.service",
	}
}
