package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// StartStandby starts a streaming hot standby of s, which must be running: a base
// backup of s into a new temporary directory, configured to start in recovery and
// stream WAL from s, served by a second postmaster on another free port. The standby
// accepts read-only connections (pg_is_in_recovery() is true) and follows every later
// change on s. Stop it (before or after s) with its own Stop.
//
// The backup uses PostgreSQL's low-level API and a file copy ("Making a Base Backup
// Using the Low Level API" in its docs), not pg_basebackup: the matrix's server
// packages ship no pg_basebackup, and Debian's (15) refuses a newer server.
// initdb's default pg_hba.conf with --auth=trust already lets 127.0.0.1 connect for
// replication, and wal_level=replica / max_wal_senders=10 are PostgreSQL's defaults.
func (s *Server) StartStandby() (*Server, error) {
	if !s.Running() {
		return nil, errors.New("pgtest: StartStandby needs a running primary")
	}
	dir, err := os.MkdirTemp("", "pgtest-standby-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	sb := &Server{opts: s.opts, binDir: s.binDir, dir: dir, dataDir: filepath.Join(dir, "data"), cred: s.cred}
	if err := sb.chown(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := s.baseBackup(sb); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := sb.configureStandbyOf(s); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := sb.startOnFreePort(); err != nil {
		_ = sb.Stop()
		return nil, err
	}
	return sb, nil
}

// baseBackup copies s's data directory into sb's between the backup start and stop
// calls of one session, then the backup label and the WAL the copy needs.
func (s *Server) baseBackup(sb *Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := sql.Open("postgres", s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx) // a non-exclusive backup belongs to its session
	if err != nil {
		return fmt.Errorf("pgtest: backup session: %w", err)
	}
	defer conn.Close()
	start, stop, err := backupCalls(ctx, conn)
	if err != nil {
		return err
	}
	// A temporary physical slot keeps the WAL from here until the session ends, as
	// pg_basebackup's own does, so no checkpoint recycles a segment the copy needs.
	if _, err := conn.ExecContext(ctx, `SELECT pg_create_physical_replication_slot('pgtest_backup_' || pg_backend_pid(), true, true)`); err != nil {
		return fmt.Errorf("pgtest: backup slot: %w", err)
	}
	if _, err := conn.ExecContext(ctx, start); err != nil {
		return fmt.Errorf("pgtest: %s: %w", start, err)
	}
	if err := sb.copyTree(s.dataDir, sb.dataDir, skipInBaseBackup); err != nil {
		return err
	}
	var label, spcmap string
	if err := conn.QueryRowContext(ctx, stop).Scan(&label, &spcmap); err != nil {
		return fmt.Errorf("pgtest: %s: %w", stop, err)
	}
	if err := sb.writeFile("backup_label", label); err != nil {
		return err
	}
	if spcmap != "" {
		if err := sb.writeFile("tablespace_map", spcmap); err != nil {
			return err
		}
	}
	// pg_backup_stop switched to a new WAL segment, so every record up to the stop
	// point is in a complete file now.
	return sb.copyTree(filepath.Join(s.dataDir, "pg_wal"), filepath.Join(sb.dataDir, "pg_wal"), nil)
}

// backupCalls are the low-level backup's start and stop statements for the server's
// version: PostgreSQL 15 renamed pg_start_backup/pg_stop_backup and dropped their
// exclusive mode.
func backupCalls(ctx context.Context, conn *sql.Conn) (start, stop string, err error) {
	num, err := serverVersionNum(ctx, conn)
	if err != nil {
		return "", "", err
	}
	if num < 150000 {
		return `SELECT pg_start_backup('pgtest', true, false)`,
			`SELECT labelfile, COALESCE(spcmapfile, '') FROM pg_stop_backup(false, false)`, nil
	}
	return `SELECT pg_backup_start('pgtest', true)`,
		`SELECT labelfile, COALESCE(spcmapfile, '') FROM pg_backup_stop(false)`, nil
}

// skipInBaseBackup names what a base backup leaves out (PostgreSQL's docs list them):
// directories whose contents the server rebuilds at start, the WAL (copied after the
// stop call) and the running server's own files. The directories themselves are kept.
func skipInBaseBackup(rel string, d fs.DirEntry) bool {
	switch filepath.Dir(rel) {
	case "pg_wal", "pg_replslot", "pg_dynshmem", "pg_notify", "pg_serial", "pg_snapshots", "pg_stat_tmp", "pg_subtrans":
		return true
	}
	switch d.Name() {
	case "postmaster.pid", "postmaster.opts", "pg_internal.init":
		return true
	}
	return false
}

// configureStandbyOf makes sb start in recovery, streaming from primary.
func (sb *Server) configureStandbyOf(primary *Server) error {
	if err := sb.writeFile("standby.signal", ""); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(sb.dataDir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgtest: postgresql.auto.conf: %w", err)
	}
	_, err = fmt.Fprintf(f, "primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=pgtest_standby'\n", primary.Port)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyTree copies the directories and regular files under src to dst (owned by the
// server's user), leaving out what skip names. A file that vanishes while the server
// runs is left out too: the WAL replay recreates whatever the backup needs.
func (sb *Server) copyTree(src, dst string, skip func(rel string, d fs.DirEntry) bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pgtest: backup: %w", err)
		}
		rel, _ := filepath.Rel(src, p)
		if skip != nil && rel != "." && skip(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o700); err != nil {
				return fmt.Errorf("pgtest: backup: %w", err)
			}
			return sb.chown(target)
		case d.Type().IsRegular():
			return sb.copyFile(p, target)
		}
		return nil // no tablespaces or other links in a pgtest cluster
	})
}

func (sb *Server) copyFile(src, dst string) error {
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgtest: backup: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("pgtest: backup: %w", err)
	}
	if _, err = io.Copy(out, in); err == nil {
		err = out.Close()
	} else {
		out.Close()
	}
	if err != nil {
		return fmt.Errorf("pgtest: backup %s: %w", src, err)
	}
	return sb.chown(dst)
}

// writeFile writes a file into sb's data directory, owned by the server's user.
func (sb *Server) writeFile(name, content string) error {
	p := filepath.Join(sb.dataDir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return sb.chown(p)
}

// chown gives p to the server's user when the tests run as root (dropRootPrivileges).
func (sb *Server) chown(p string) error {
	if sb.cred == nil {
		return nil
	}
	if err := os.Chown(p, int(sb.cred.Uid), int(sb.cred.Gid)); err != nil {
		return fmt.Errorf("pgtest: chown %s: %w", p, err)
	}
	return nil
}
