// Package runners runs the goroutines of tasks on a pool that keeps idle
// goroutines a while, so that their grown stacks are reused. It imports
// nothing of the module.
package runners
