package main

// The drivers this agent binary can open, by their registered names. Each
// import registers its driver from an init function.
import (
	_ "github.com/fencegate/fencegate/devices/sim" // "sim": simulated token-aware device
)
