// Package driverpb is the generated gRPC code of the driver plugin protocol
// (driver.proto). Regenerate with `go generate ./plugins/...`.
package driverpb

//go:generate sh generate.sh
