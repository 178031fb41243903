// Package clitest holds only tests: they build every fencegate binary once
// (go build -o DIR ./cmd/...) and run them as an operator does, checking
// exit codes and output of --version, -h and help.
package clitest
