package boltstore

// CrashImage gives the external tests (package boltstore_test)
// a21CrashImage: a copy of a store file and its log as a SIGKILL now
// would leave them.
var CrashImage = a21CrashImage
