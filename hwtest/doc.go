// Package hwtest is the conformance suite for serial device targets: the
// reference firmware simulator (package hwtest/simfirmware, built as the
// command hwtest/cmd/simfirmware) on pseudo-terminals in CI, or real
// firmware on a real port (see README.md). The suite itself lives in this
// package's tests; BuildSim builds the simulator command and Sim runs and
// steers a simulator process.
package hwtest
