package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Source is what a release is built from.
type Source struct {
	Root    string    // the module's root directory
	Version string    // semver, no leading v
	Commit  string    // 12 hex digits, "-dirty" appended for uncommitted changes
	Time    time.Time // SOURCE_DATE_EPOCH: every timestamp in every artifact
}

// ReadSource reads the commit and its time from git (the go command needs
// git for the same), SOURCE_DATE_EPOCH from the environment when set.
func ReadSource(root, version string) (Source, error) {
	s := Source{Root: root}
	rev, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		return s, fmt.Errorf("release builds need a git checkout to name the commit: %v", err)
	}
	s.Commit = rev[:12]
	if st, err := git(root, "status", "--porcelain", "--untracked-files=no"); err != nil {
		return s, err
	} else if st != "" {
		s.Commit += "-dirty"
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git(root, "log", "-1", "--format=%ct"); err != nil {
			return s, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return s, fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", epoch)
	}
	s.Time = time.Unix(sec, 0).UTC()
	s.Version = strings.TrimPrefix(version, "v")
	if s.Version == "" {
		// Sorts before any real release, and after the previous snapshot.
		s.Version = fmt.Sprintf("0.0.0-git%s.%s", s.Time.Format("20060102150405"), rev[:7])
	}
	return s, nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
