// Package targets lists the platforms braid is released for: one list for the
// release tool, the third-party notice (which covers what any of them links)
// and the docs.
package targets

// Target is one release platform: the Go build settings and the names the
// package formats give the architecture.
type Target struct {
	GOARCH string
	GOARM  string // for arm: the ARM version (7: Raspberry Pi 2+, most ARM routers)
	GOMIPS string // for mips and mipsle: softfloat, as OpenWrt's kernels have no FPU emulation by default
	Deb    string // Debian's architecture name
	RPM    string // RPM's
	IPK    string // OpenWrt's (a representative one: OpenWrt names packages by SoC family; see docs/install.md)
}

// Name is how release artifacts name the target: GOARCH plus the variant.
func (t Target) Name() string {
	switch {
	case t.GOARM != "":
		return t.GOARCH + "v" + t.GOARM
	case t.GOMIPS != "":
		return t.GOARCH + "-" + t.GOMIPS
	}
	return t.GOARCH
}

// Env is the environment that builds for t (static: no cgo).
func (t Target) Env() []string {
	env := []string{"GOOS=linux", "GOARCH=" + t.GOARCH, "CGO_ENABLED=0"}
	if t.GOARM != "" {
		env = append(env, "GOARM="+t.GOARM)
	}
	if t.GOMIPS != "" {
		env = append(env, "GOMIPS="+t.GOMIPS)
	}
	return env
}

// All are the release targets, in the order artifacts are built.
var All = []Target{
	{GOARCH: "amd64", Deb: "amd64", RPM: "x86_64", IPK: "x86_64"},
	{GOARCH: "arm64", Deb: "arm64", RPM: "aarch64", IPK: "aarch64_generic"},
	{GOARCH: "arm", GOARM: "7", Deb: "armhf", RPM: "armv7hl", IPK: "arm_cortex-a7_neon-vfpv4"},
	{GOARCH: "mips", GOMIPS: "softfloat", Deb: "mips", RPM: "mips", IPK: "mips_24kc"},
	{GOARCH: "mipsle", GOMIPS: "softfloat", Deb: "mipsel", RPM: "mipsel", IPK: "mipsel_24kc"},
	{GOARCH: "riscv64", Deb: "riscv64", RPM: "riscv64", IPK: "riscv64_riscv64"},
}
