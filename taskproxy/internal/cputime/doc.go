// Package cputime reads the CPU time this process has used, for the
// benchmarks that report CPU time per operation (steady on cores other
// programs share, where wall time per operation is not). It imports
// nothing of the module.
package cputime

import "errors"

// ErrUnsupported is Process's error on a system it cannot read.
var ErrUnsupported = errors.New("reading the process's CPU time is not supported on this system")
