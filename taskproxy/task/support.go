package task

import "fmt"

// Support is a tool's task mode, as 2025-11-25 execution.taskSupport
// spells it: whether a call of the tool may, must or must not run as a
// task. The gateway's configuration sets it per tool; an upstream's
// tools/list declares its own.
type Support string

// The task modes.
const (
	SupportForbidden Support = "forbidden"
	SupportOptional  Support = "optional"
	SupportRequired  Support = "required"
)

// ParseSupport validates a mode name.
func ParseSupport(s string) (Support, error) {
	switch m := Support(s); m {
	case SupportForbidden, SupportOptional, SupportRequired:
		return m, nil
	}
	return "", fmt.Errorf("unknown task support %q (want forbidden, optional or required)", s)
}
