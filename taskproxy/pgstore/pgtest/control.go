package pgtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Stopping and starting a throwaway cluster's server while its clients run,
// for fault-injection tests: the data directory stays, so the databases
// and their rows are there again after a restart.

// ErrNotControllable is returned by the server controls for a server of
// EnvDSN, which the tests did not start and must not stop.
var ErrNotControllable = errors.New("the PostgreSQL server of " + EnvDSN + " was not started by the tests and cannot be stopped or restarted by them")

// Controllable reports whether the tests started the server, so that they
// may stop and restart it.
func (s *Server) Controllable() bool { return s != nil && s.dir != "" }

// StartServer starts the cluster's server (again) and waits until it
// accepts connections.
func (s *Server) StartServer() error {
	if !s.Controllable() {
		return ErrNotControllable
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run("pg_ctl", "-D", data, "-o", s.opts, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "120", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return nil
}

// StopServer stops the cluster's server with the shutdown mode given
// ("smart", "fast" or "immediate", as pg_ctl's -m) and waits until it is
// down; the cluster's files stay for StartServer.
func (s *Server) StopServer(mode string) error {
	if !s.Controllable() {
		return ErrNotControllable
	}
	if out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", mode, "-w", "-t", "120", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %w\n%s", mode, err, out)
	}
	return nil
}

// Restart restarts the cluster's server with the shutdown mode given (as
// StopServer's) and waits until it accepts connections again: "immediate"
// is a crash, and the server recovers from its WAL as it starts.
func (s *Server) Restart(mode string) error {
	if !s.Controllable() {
		return ErrNotControllable
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run("pg_ctl", "-D", data, "-o", s.opts, "-l", filepath.Join(s.dir, "server.log"), "-m", mode, "-w", "-t", "120", "restart"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		return fmt.Errorf("pg_ctl restart -m %s: %w\n%s\n%s", mode, err, out, tail(log, 2000))
	}
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
