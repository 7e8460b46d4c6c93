//go:build windows

package integration

import "syscall"

// setSocketOption sets the SOL_SOCKET option opt of the socket fd.
func setSocketOption(fd uintptr, opt, value int) error {
	return syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, opt, value)
}
