// Package line is the driver for plain ASCII serial controllers
// (SCPI-like instruments, relay boards): each op declared in the agent
// config renders a request line from the command's args with text/template
// (args checked against declared types first), sends it, and waits for a
// reply line matching the op's success pattern (its named groups become
// the output) or its device-error pattern (the device's message becomes a
// device_error). Lines matching neither, and garbage, are logged and
// skipped until the op's timeout. It registers itself as driver "line".
//
// Such controllers know nothing of tokens: the agent's fence is the only
// one (Capabilities.ChecksTokens is false).
package line
