//go:build unix

package integration

import "syscall"

// setSocketOption sets the SOL_SOCKET option opt of the socket fd.
func setSocketOption(fd uintptr, opt, value int) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, value)
}
