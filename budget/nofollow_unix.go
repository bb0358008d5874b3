//go:build unix

package budget

import "syscall"

// oNoFollow makes opening a symbolic link fail (ELOOP) instead of following it.
const oNoFollow = syscall.O_NOFOLLOW
