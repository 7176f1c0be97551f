package hardening

import (
	"slices"
	"strings"
	"testing"
)

func keys(ds []Directive) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Key)
	}
	return out
}

func TestWorker(t *testing.T) {
	tests := []struct {
		name       string
		relax, add []string
		without    []string // keys that must be missing
		with       []string // keys that must be there
		err        string   // part of the error; "" for none
	}{
		{name: "defaults", with: keys(WorkerDefaults())},
		{name: "relax one", relax: []string{"PrivateDevices"}, without: []string{"PrivateDevices"}, with: []string{"PrivateUsers", "NoNewPrivileges"}},
		{name: "add", add: []string{"PrivateTmp", "MemoryDenyWriteExecute"}, with: []string{"PrivateTmp", "MemoryDenyWriteExecute", "PrivateUsers"}},
		{
			name:    "no private users",
			relax:   []string{"PrivateUsers", "ProtectSystem", "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups", "ProtectClock", "ProtectHostname", "CapabilityBoundingSet", "InaccessiblePaths"},
			without: []string{"PrivateUsers"}, with: []string{"NoNewPrivileges"},
		},
		{name: "private users needed", relax: keys(WorkerDefaults())[:1], err: "relax: PrivateUsers is needed by ProtectSystem, PrivateDevices"},
		{name: "private users needed by add", relax: []string{"PrivateUsers", "ProtectSystem", "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups", "ProtectClock", "ProtectHostname", "CapabilityBoundingSet", "InaccessiblePaths"}, add: []string{"PrivateTmp"}, err: "PrivateUsers is needed by PrivateTmp"},
		{name: "unknown", add: []string{"ProtectHome"}, err: `add: unknown directive "ProtectHome": expected one of SystemCallFilter`},
		{name: "default in add", add: []string{"NoNewPrivileges"}, err: `add: unknown directive "NoNewPrivileges"`},
		{name: "twice", relax: []string{"ProtectClock", "ProtectClock"}, err: "relax: ProtectClock is listed twice"},
		{name: "empty name", relax: []string{""}, err: `relax: unknown directive ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Worker(tt.relax, tt.add)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Worker(%q, %q) error = %v; want one containing %q", tt.relax, tt.add, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Worker(%q, %q): %v", tt.relax, tt.add, err)
			}
			k := keys(got)
			for _, w := range tt.with {
				if !slices.Contains(k, w) {
					t.Errorf("Worker(%q, %q) = %q; want %s in it", tt.relax, tt.add, k, w)
				}
			}
			for _, w := range tt.without {
				if slices.Contains(k, w) {
					t.Errorf("Worker(%q, %q) = %q; want no %s", tt.relax, tt.add, k, w)
				}
			}
		})
	}
}

// TestSets checks the rules every set follows: a key once per set, a
// directive that needs PrivateUsers only in a set that has it, nothing the
// helper's tmux or a container rules out, and workers never without W+X
// memory or namespaces by default (Node.js, sandboxes).
func TestSets(t *testing.T) {
	for name, set := range map[string][]Directive{
		"helper": Helper(), "controller": Controller(), "worker": WorkerDefaults(),
	} {
		k := keys(set)
		for i, key := range k {
			if slices.Contains(k[:i], key) {
				t.Errorf("%s set: %s twice", name, key)
			}
		}
		for _, d := range set {
			if d.NeedsPrivateUsers && !slices.Contains(k, "PrivateUsers") {
				t.Errorf("%s set: %s needs PrivateUsers, which it lacks", name, d.Key)
			}
			if d.Doc == "" {
				t.Errorf("%s set: %s has no Doc", name, d.Key)
			}
		}
		for _, banned := range []string{"PrivateTmp", "ProtectKernelLogs", "ProtectProc", "ProtectHome"} {
			if slices.Contains(k, banned) {
				t.Errorf("%s set has %s: it broke `legion tmux` (PrivateTmp) or fails in a container (226/NAMESPACE)", name, banned)
			}
		}
	}
	w := keys(WorkerDefaults())
	for _, agentNeeds := range []string{"MemoryDenyWriteExecute", "RestrictNamespaces", "SystemCallFilter"} {
		if slices.Contains(w, agentNeeds) {
			t.Errorf("worker defaults have %s, which agents need relaxed", agentNeeds)
		}
	}
	for _, d := range WorkerDefaults() {
		if d.Key != "RestrictAddressFamilies" {
			continue
		}
		// Agents use the network, unix sockets, and netlink (Node.js
		// lists the interfaces; bubblewrap brings up a loopback).
		for _, f := range []string{"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"} {
			if !slices.Contains(strings.Fields(d.Value), f) {
				t.Errorf("worker default RestrictAddressFamilies=%s lacks %s", d.Value, f)
			}
		}
	}
	for _, d := range WorkerOptional() {
		// RestrictAddressFamilies in add narrows the default's.
		if slices.Contains(w, d.Key) && d.Key != "RestrictAddressFamilies" {
			t.Errorf("%s is both a worker default and optional", d.Key)
		}
	}
}

// TestWorkerAddNarrows: RestrictAddressFamilies in add replaces the
// default's value (one line: systemd would merge two allow-lists into the
// wider), and the defaults that were optional before still load in add,
// changing nothing.
func TestWorkerAddNarrows(t *testing.T) {
	got, err := Worker(nil, []string{"RestrictAddressFamilies", "LockPersonality", "SystemCallArchitectures"})
	if err != nil {
		t.Fatal(err)
	}
	var families []string
	for _, d := range got {
		if d.Key == "RestrictAddressFamilies" {
			families = append(families, d.Value)
		}
	}
	if !slices.Equal(families, []string{"AF_UNIX AF_INET AF_INET6"}) {
		t.Errorf("RestrictAddressFamilies lines %q; want the one narrower value", families)
	}
	if !slices.Equal(keys(got), keys(WorkerDefaults())) {
		t.Errorf("keys %v; want the defaults' %v (nothing added twice)", keys(got), keys(WorkerDefaults()))
	}
}
