package testutil

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every tool a test requires (testutil.Tools; RequireTool refuses others) comes from a Debian
// package that scripts/install-deps.sh installs for the tool's profile: the package that provides
// it on this machine (`dpkg -S`) is in `install-deps.sh --list PROFILE`, or is Essential (in every
// Debian root). A tool of the test profile must be installed here, since make test ran install-deps.
func TestInstallDepsInstallsEveryTool(t *testing.T) {
	RequireTools(t, "bash", "dpkg")
	lists := map[string][]string{}
	found := map[string]string{} // tool -> path
	for tool, profile := range tools {
		if profile == "" {
			continue
		}
		if lists[profile] == nil {
			out, err := exec.Command("bash", filepath.Join(RepoRoot(), "scripts", "install-deps.sh"), "--list", profile).Output()
			if err != nil {
				t.Fatalf("install-deps.sh --list %s: %v", profile, err)
			}
			lists[profile] = strings.Fields(string(out))
		}
		path, err := exec.LookPath(tool)
		if err == nil && !debianDir(filepath.Dir(path)) {
			// Another copy first on PATH (a pyenv python3 here): a fresh machine has Debian's.
			for _, d := range []string{"/usr/bin", "/usr/sbin", "/bin", "/sbin"} {
				if p, e := exec.LookPath(filepath.Join(d, tool)); e == nil {
					t.Logf("%s: %s is first on PATH; checking Debian's %s", tool, path, p)
					path = p
					break
				}
			}
		}
		switch {
		case err == nil:
			found[tool] = path
		case profile == "test":
			t.Errorf("%s is not installed, though make test ran scripts/install-deps.sh test: add the package that provides it to its list", tool)
		default:
			t.Logf("%s (profile %s) is not installed here: not checked", tool, profile)
		}
	}
	var paths []string
	for _, p := range found {
		paths = append(paths, p)
	}
	owners, ess := providers(paths), essentials()
	for tool, path := range found {
		profile, pkgs := tools[tool], owners[path]
		if len(pkgs) == 0 {
			t.Errorf("%s (%s): no Debian package provides it (dpkg -S): install-deps.sh cannot install it on a fresh machine", tool, path)
			continue
		}
		ok := false
		for _, p := range pkgs {
			ok = ok || slices.Contains(lists[profile], p) || ess[p]
		}
		if !ok {
			t.Errorf("%s (%s) comes from package %s, which scripts/install-deps.sh %s does not install: add it to that profile's list",
				tool, path, strings.Join(pkgs, ", "), profile)
		}
	}
}

// providers maps each path to the packages `dpkg -S` names for it, trying the link's target and
// the pre-usrmerge names (/bin, /sbin) that dpkg may have recorded instead. One dpkg call for
// all (each call reads dpkg's whole file database).
func providers(paths []string) map[string][]string {
	cands := map[string][]string{}
	var all []string
	for _, path := range paths {
		c := []string{path}
		if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
			c = append(c, real)
		}
		for _, p := range slices.Clone(c) {
			if rest, ok := strings.CutPrefix(p, "/usr"); ok {
				c = append(c, rest)
			}
		}
		cands[path] = c
		all = append(all, c...)
	}
	out, _ := exec.Command("dpkg", append([]string{"-S"}, all...)...).Output() // exit 1: some candidates unknown
	owners := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		names, file, found := strings.Cut(line, ": ")
		if !found || strings.HasPrefix(line, "diversion ") {
			continue
		}
		for _, n := range strings.Split(names, ", ") {
			n, _, _ = strings.Cut(n, ":") // an arch qualifier
			owners[file] = append(owners[file], n)
		}
	}
	result := map[string][]string{}
	for path, c := range cands {
		for _, p := range c {
			if len(owners[p]) > 0 {
				result[path] = owners[p]
				break
			}
		}
	}
	return result
}

func debianDir(d string) bool {
	return slices.Contains([]string{"/usr/bin", "/usr/sbin", "/bin", "/sbin"}, d)
}

// essentials are the installed packages marked Essential (present in every Debian root).
func essentials() map[string]bool {
	out, _ := exec.Command("dpkg-query", "-W", "-f", "${Package} ${Essential}\n").Output()
	m := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if name, ess, _ := strings.Cut(line, " "); ess == "yes" {
			m[name] = true
		}
	}
	return m
}
