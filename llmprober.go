// Package llmprober is the module's root. It holds what the commands need
// from the repository's top level: the release version.
package llmprober

import _ "embed" // for Version

// Version is the VERSION file, the release this tree is: the version of a
// build that does not stamp one with -ldflags (a plain go build or
// go install), as make build does.
//
//go:embed VERSION
var Version string
