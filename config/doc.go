// Package config owns legion.toml: its schema (with every key's default and
// documentation, see [Schema]), loading and validating it into a [Config],
// the argv templates of the agents ([Expand]) and adding teams to the file
// ([AddTeam]).
//
// Every problem in a file is reported, each as an [*Error] that names the
// file, the line and the dotted key (e.g. teams.demo.stale_after) and says
// what was expected; several problems come back joined with errors.Join.
//
// The package never talks to systemd, never starts processes and never
// rewrites what a user wrote: [AddTeam] only appends a table to the file.
package config
