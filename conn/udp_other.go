//go:build !linux

package conn

// Listen is implemented for Linux only.
func Listen(opt Options) (Conn, error) { return nil, ErrUnsupported }
