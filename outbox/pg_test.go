package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// pgServer is a throwaway PostgreSQL instance for this test binary: a data
// directory and a unix socket in a private temporary directory, started
// with the Debian package's binaries and stopped by TestMain.
type pgServer struct {
	dir, sock string
	cmd       *exec.Cmd
	log       bytes.Buffer
	mu        sync.Mutex
	dbs       int
}

var (
	pgOnce   sync.Once
	pg       *pgServer
	pgErr    error
	pgMissed string // why PostgreSQL tests cannot run, when they cannot
)

// pgBinDir finds Debian's PostgreSQL binaries, newest version first.
func pgBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// startPostgres starts the shared instance once.
func startPostgres() (*pgServer, error) {
	pgOnce.Do(func() {
		bin := pgBinDir()
		if bin == "" {
			pgMissed = "PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (apt-get install postgresql): " +
				"THE POSTGRESQL OUTBOX TESTS DID NOT RUN"
			return
		}
		pg, pgErr = launchPostgres(bin)
	})
	return pg, pgErr
}

// launchPostgres runs initdb and postgres, as nobody when this process is
// root (postgres refuses to run as root).
func launchPostgres(bin string) (*pgServer, error) {
	dir, err := os.MkdirTemp("", "ferry-pg-")
	if err != nil {
		return nil, err
	}
	s := &pgServer{dir: dir, sock: dir}
	cred, err := pgCredential()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "ferry", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", s.sock, "-p", "5432",
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "max_connections=50")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	s.cmd.Env = initdb.Env
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := s.waitReady(30 * time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// pgCredential is nobody's when this process is root, else nil (run as
// ourselves).
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("postgres must not run as root and there is no user nobody: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// dsn is the connection string of database name.
func (s *pgServer) dsn(name string) string {
	return fmt.Sprintf("host=%s port=5432 user=ferry dbname=%s sslmode=disable", s.sock, name)
}

func (s *pgServer) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		db, err := sql.Open("pgx", s.dsn("postgres"))
		if err == nil {
			err = db.Ping()
			db.Close()
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not start: %v\n%s", err, s.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newDatabase creates a fresh database and returns its DSN.
func (s *pgServer) newDatabase(ctx context.Context) (string, error) {
	s.mu.Lock()
	s.dbs++
	name := fmt.Sprintf("outbox_test_%d", s.dbs)
	s.mu.Unlock()
	db, err := sql.Open("pgx", s.dsn("postgres"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return s.dsn(name), nil
}

// stop shuts postgres down (fast shutdown) and removes its directory.
func (s *pgServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	os.RemoveAll(s.dir)
}
