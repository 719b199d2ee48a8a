package release

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ParseVersionTxt reads version.txt, shell KEY=VALUE lines (FLATCAR_VERSION=4230.2.3, ...), and
// returns FLATCAR_VERSION after checking it is a release number.
func ParseVersionTxt(r io.Reader) (string, error) {
	vars := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			vars[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	v, ok := vars["FLATCAR_VERSION"]
	if !ok {
		return "", fmt.Errorf("version.txt has no FLATCAR_VERSION")
	}
	if !versionRe.MatchString(v) {
		return "", fmt.Errorf("version.txt has FLATCAR_VERSION=%q, not a release number", v)
	}
	return v, nil
}
