package config

import "github.com/braid-vpn/braid/internal/tomlerr"

// Error is every error Load and Parse return. It renders as one line:
//
//	client.toml: client.scheduler: unknown scheduler "fastest" (valid: ...)
//	x.toml: line 7: unknown key "shceduler"
//
// It is the type shared by all of braid's TOML files (the lab's scenarios
// too), so that their errors read alike; see internal/tomlerr.
type Error = tomlerr.Error
