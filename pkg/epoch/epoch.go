// Package epoch is the one clock of what an image build writes (file times, filesystem creation
// times): SOURCE_DATE_EPOCH when set (reproducible-builds.org), so that the same inputs give the
// same bytes; the wall clock otherwise.
package epoch

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Var is the environment variable read.
const Var = "SOURCE_DATE_EPOCH"

// Now is SOURCE_DATE_EPOCH, or the current time (whole seconds) when it is unset or invalid.
func Now() time.Time {
	if t, ok, err := Get(); ok && err == nil {
		return t
	}
	return time.Now().Truncate(time.Second)
}

// Get returns SOURCE_DATE_EPOCH; ok is false when it is unset.
func Get() (t time.Time, ok bool, err error) {
	v := os.Getenv(Var)
	if v == "" {
		return time.Time{}, false, nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil || sec < 0 || sec > 1<<32-1 {
		return time.Time{}, true, fmt.Errorf("%s=%q is not a Unix time in seconds", Var, v)
	}
	return time.Unix(sec, 0).UTC(), true, nil
}
