//go:build !unix

package budget

// oNoFollow: no such open flag here; Load checks with Lstat first.
const oNoFollow = 0
