// Package logbuf is a buffer that a logger may write to from its goroutines
// while a test reads what it holds: tests that check a log line use it.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer whose Write and String may be called concurrently.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
