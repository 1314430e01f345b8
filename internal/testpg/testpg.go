// Package testpg starts a throwaway PostgreSQL server for a test: initdb
// into a temporary directory, pg_ctl start on a free loopback port, and a
// stop and removal when the test ends. It uses the Debian package's
// binaries (/usr/lib/postgresql/<version>/bin, installed by .ci/run); as
// root it runs them as the postgres user the package creates, since
// PostgreSQL refuses to run as root. Without PostgreSQL the test is
// skipped, except under CI (CI set), where it fails.
package testpg

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

// Server is a running PostgreSQL server.
type Server struct {
	// DSN reaches the server's postgres database as the superuser
	// postgres over TCP, no password (trust on loopback).
	DSN  string
	Port int
	dir  string
}

// binDir finds the newest installed PostgreSQL's bin directory.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl): install Debian's postgresql")
}

// Start starts a server for t and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", "berth-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var asUser []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs the postgres user (Debian's postgresql package creates it): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) ([]byte, error) {
		full := append(append([]string{}, asUser...), args...)
		cmd := exec.Command(full[0], full[1:]...)
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	data := filepath.Join(dir, "data")
	if out, err := run(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--locale=C"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=100", port, dir)
	if out, err := run(filepath.Join(bin, "pg_ctl"), "-D", data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	t.Cleanup(func() {
		if out, err := run(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "-t", "30", "stop"); err != nil {
			t.Logf("pg_ctl stop: %v\n%s", err, out)
		}
	})
	return &Server{DSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), Port: port, dir: dir}
}

// LogFile is the server's log.
func (s *Server) LogFile() string { return filepath.Join(s.dir, "server.log") }

func freePort(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}
