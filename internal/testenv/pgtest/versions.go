package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/outbox-operator/outbox-operator/internal/pgversion"
)

// MatrixVersions are the PostgreSQL major versions hack/install-pg-matrix.sh installs
// and `make test-pg-matrix` runs the suites against: the product's supported range.
var MatrixVersions = func() []int {
	var out []int
	for m := pgversion.MinMajor; m <= pgversion.MaxMajor; m++ {
		out = append(out, m)
	}
	return out
}()

// VersionEnv names the environment variable that picks the server's major version:
// PG_VERSION=16 starts the binaries hack/install-pg-matrix.sh installed for 16; unset,
// the tests use Debian's server (hack/install-postgres.sh) as before.
const VersionEnv = "PG_VERSION"

// pgVersionsDir is where hack/install-pg-matrix.sh installs one directory per major
// (keep the two in step): $OUTBOX_PG_VERSIONS_DIR, else /var/cache/... as root (the
// server then runs as the 'postgres' user, who cannot enter /root), else the user's
// cache directory.
func pgVersionsDir() string {
	if d := os.Getenv("OUTBOX_PG_VERSIONS_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/cache/outbox-operator/postgres"
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "outbox-operator", "postgres")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "outbox-operator", "postgres")
}

// findBinDir locates initdb and postgres once per process: the installed matrix
// version when PG_VERSION is set, else Debian's.
var findBinDir = sync.OnceValues(func() (string, error) {
	if v := os.Getenv(VersionEnv); v != "" {
		return matrixBinDir(v)
	}
	return defaultBinDir()
})

// matrixBinDir is the bin directory of the requested major version ($PG_BINDIR if
// set, else the installed matrix version), checked to run and to be that version.
func matrixBinDir(v string) (string, error) {
	major, err := strconv.Atoi(v)
	if err != nil || !isMatrixVersion(major) {
		return "", fmt.Errorf("pgtest: %s=%q: want one of %v", VersionEnv, v, MatrixVersions)
	}
	d := os.Getenv("PG_BINDIR")
	if d == "" {
		d = filepath.Join(pgVersionsDir(), v, "bin")
	}
	if !isExec(filepath.Join(d, "postgres")) || !isExec(filepath.Join(d, "initdb")) {
		return "", fmt.Errorf("pgtest: %s=%s: PostgreSQL %s is not installed in %s; run hack/install-pg-matrix.sh %s (or make postgres PG_VERSION=%s)",
			VersionEnv, v, v, d, v, v)
	}
	out, err := exec.Command(filepath.Join(d, "postgres"), "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pgtest: %s/postgres --version: %w: %s", d, err, strings.TrimSpace(string(out)))
	}
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "postgres (PostgreSQL) "+v+".") {
		return "", fmt.Errorf("pgtest: %s=%s but %s/postgres is %q", VersionEnv, v, d, got)
	}
	return d, nil
}

func isMatrixVersion(major int) bool {
	return major >= pgversion.MinMajor && major <= pgversion.MaxMajor
}

// defaultBinDir: $PG_BINDIR, pg_config --bindir, the newest /usr/lib/postgresql/*/bin,
// then $PATH.
func defaultBinDir() (string, error) {
	var candidates []string
	if d := os.Getenv("PG_BINDIR"); d != "" {
		candidates = append(candidates, d)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool { return versionOf(versions[i]) > versionOf(versions[j]) })
	candidates = append(candidates, versions...)
	if p, err := exec.LookPath("postgres"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if isExec(filepath.Join(d, "postgres")) && isExec(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", errors.New("pgtest: PostgreSQL server binaries (initdb, postgres) not found; run hack/install-postgres.sh or set PG_BINDIR")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
