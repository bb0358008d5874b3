package budget

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Usage is one meter's state as saved between runs.
type Usage struct {
	Used  uint64    `json:"used"`
	Since time.Time `json:"since"`
}

// ErrCorrupt is wrapped by Load's error for a state file that does not parse.
var ErrCorrupt = errors.New("budget: state file corrupt")

// maxStateSize bounds what Load reads: a state file holds a few entries, one per
// metered local path.
const maxStateSize = 1 << 20

// Load reads the usage saved in file. A file that does not exist is no usage
// (nil, nil). Load does not follow a symbolic link at file (it is an error):
// braid runs as root, and the state file's directory may be writable by others.
// A file that does not parse is renamed to file+".corrupt", kept for the operator
// to look at, and Load returns an error wrapping ErrCorrupt that says so: the
// caller starts from zero, but not silently.
func Load(file string) (map[string]Usage, error) {
	fi, err := os.Lstat(file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, errSymlink(file, "read")
	}
	// O_NOFOLLOW too: a link planted between Lstat and open is not followed.
	f, err := os.OpenFile(file, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errSymlink(file, "read")
		}
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateSize+1))
	f.Close()
	if err != nil {
		return nil, err
	}
	var u map[string]Usage
	if err := json.Unmarshal(b, &u); err != nil || len(b) > maxStateSize {
		if err == nil {
			err = fmt.Errorf("larger than %d bytes", maxStateSize)
		}
		aside := file + ".corrupt"
		if rerr := os.Rename(file, aside); rerr != nil {
			return nil, fmt.Errorf("%w: %s: %v (and keeping it as %s: %v)", ErrCorrupt, file, err, aside, rerr)
		}
		return nil, fmt.Errorf("%w: %s: %v; kept as %s, usage starts from zero", ErrCorrupt, file, err, aside)
	}
	return u, nil
}

// Save writes usage to file so that a crash at any moment leaves either the old
// or the new state, never a torn or empty file: a temporary file of a unique name
// in the same directory (os.CreateTemp, so nobody can plant a link at a name
// known in advance), written and fsynced, renamed over file, and the directory
// fsynced so that the rename itself survives a power cut. A symbolic link at file
// is refused, not replaced.
func Save(file string, usage map[string]Usage) (err error) {
	if fi, err := os.Lstat(file); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return errSymlink(file, "replaced")
	}
	b, err := json.Marshal(usage)
	if err != nil {
		return err
	}
	dir := filepath.Dir(file)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file 0600, which is what usage needs.
	if _, err = tmp.Write(b); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func errSymlink(file, what string) error {
	return fmt.Errorf("budget: %s is a symbolic link; not %s", file, what)
}

// Restore sets the meter to saved usage, at now. A Since after now (a clock that
// ran ahead when it was saved, or an edited file) would never be passed by the
// current period, and the path would stay over its allowance for good; Restore
// then counts the saved bytes against the current period instead (an allowance
// is not given back early) and reports clamped, for the caller to log.
func (m *Meter) Restore(u Usage, now time.Time) (clamped bool) {
	m.Used, m.Since = u.Used, u.Since
	if u.Since.After(now) {
		m.Since = m.Limit.Period.Start(now)
		return true
	}
	return false
}
