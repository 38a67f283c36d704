package procstat

import (
	"os"
	"testing"
)

func TestParseCountsFieldsAfterTheLastParenthesis(t *testing.T) {
	// comm "a) (b" holds a space and both parentheses; utime 250, stime 50 ticks, rss 3 pages.
	line := "42 (a) (b) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 100 1000000 3 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	s, err := parse(42, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 42, Comm: "a) (b", PPID: 7, CPUSeconds: 3, RSSBytes: 3 * pageSize}
	if s != want {
		t.Fatalf("parse = %+v, want %+v", s, want)
	}
}

func TestParseRefusesATruncatedLine(t *testing.T) {
	if _, err := parse(1, []byte("1 (init) S 0 1")); err == nil {
		t.Fatal("a line without utime, stime and rss parsed")
	}
}

func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.PPID != os.Getppid() || s.RSSBytes <= 0 || s.CPUSeconds < 0 {
		t.Fatalf("Read(self) = %+v, want ppid %d and a positive RSS", s, os.Getppid())
	}
}

func TestPeakRSSIsAtLeastTheCurrentRSS(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	peak, err := PeakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The current RSS was read first and the peak only grows; pages are counted the
	// same way in both files.
	if peak < s.RSSBytes {
		t.Fatalf("PeakRSS = %d, below the RSS %d read before it", peak, s.RSSBytes)
	}
}
