package testutil

import (
	"os"
	"path/filepath"
)

// InstallCache is where the scripts/install-*.sh builds live, as the scripts compute it:
// ${XDG_CACHE_HOME:-~/.cache}/flatcar-capo/<sub>.
func InstallCache(sub ...string) string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(append([]string{cache, "flatcar-capo"}, sub...)...)
}
