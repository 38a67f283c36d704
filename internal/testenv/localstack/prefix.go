package localstack

import (
	"bytes"
	"io"
	"sync"
)

// prefixed returns a writer that starts every line with prefix, so the interleaved
// output of the manager and several workers stays readable.
func prefixed(w io.Writer, prefix string) io.Writer {
	if w == io.Discard {
		return w
	}
	return &prefixWriter{w: w, prefix: []byte(prefix)}
}

type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		line := append(append([]byte{}, p.prefix...), p.buf[:i+1]...)
		if _, err := p.w.Write(line); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
