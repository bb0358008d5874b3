//go:build !linux

package netwatch

import (
	"context"
	"errors"
	"log/slog"
)

// Watch is only implemented on Linux; elsewhere paths follow interfaces on
// reload (SIGHUP) only.
func Watch(ctx context.Context, log *slog.Logger) (<-chan Event, error) {
	return nil, errors.New("netwatch: interface events need Linux")
}
