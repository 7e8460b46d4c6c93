package pgtest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// A throwaway cluster's server can be restarted in each shutdown mode and
// stopped and started again; its rows survive, and while it is stopped
// nothing connects. A server of MCP_TASKS_TEST_DSN refuses the controls.
func TestServerControls(t *testing.T) {
	t.Parallel()
	if os.Getenv(pgtest.EnvDSN) != "" {
		srv, _ := pgtest.Start("")
		if srv.Controllable() || !errors.Is(srv.Restart("fast"), pgtest.ErrNotControllable) {
			t.Errorf("a server of %s must not be controllable", pgtest.EnvDSN)
		}
		return
	}
	srv, err := pgtest.Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, srv.DSN)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"restart -m fast", func() error { return srv.Restart("fast") }},
		{"restart -m immediate", func() error { return srv.Restart("immediate") }},
		{"stop and start", func() error {
			if err := srv.StopServer("fast"); err != nil {
				return err
			}
			if exec("SELECT 1") == nil {
				t.Errorf("the stopped server answered")
			}
			return srv.StartServer()
		}},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if err := exec("INSERT INTO kept SELECT count(*) + 1 FROM kept"); err != nil {
			t.Errorf("after %s: %v", step.name, err)
		}
	}
}
