//go:build !linux

package tundev

import "errors"

// Create is implemented for Linux only.
func Create(opt Options) (Device, error) {
	return nil, errors.New("tundev: Create is implemented for Linux only")
}
