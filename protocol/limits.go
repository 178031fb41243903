package protocol

// MaxCommandIDLen is the longest command id, in bytes (a command's "id" is
// 1..MaxCommandIDLen bytes). The agent's fence store enforces the same bound.
const MaxCommandIDLen = 128
