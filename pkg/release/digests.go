package release

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
)

// Digests is a parsed DIGESTS file: algorithm ("SHA512") -> file name -> lower-case hex digest.
type Digests map[string]map[string]string

// ParseDigests reads the "# <ALGO> HASH" sections of a DIGESTS file, each followed by lines
// "<hex>  <file>".
func ParseDigests(b []byte) (Digests, error) {
	d := Digests{}
	algo := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			f := strings.Fields(strings.TrimPrefix(line, "#"))
			algo = ""
			if len(f) == 2 && strings.EqualFold(f[1], "HASH") {
				algo = strings.ToUpper(f[0])
			}
		case algo != "":
			f := strings.Fields(line)
			if len(f) != 2 {
				return nil, fmt.Errorf("DIGESTS: malformed line %q", line)
			}
			if _, err := hex.DecodeString(f[0]); err != nil {
				return nil, fmt.Errorf("DIGESTS: %s digest of %s is not hex", algo, f[1])
			}
			if d[algo] == nil {
				d[algo] = map[string]string{}
			}
			d[algo][f[1]] = strings.ToLower(f[0])
		}
	}
	return d, sc.Err()
}

// SHA512 returns the SHA512 digest listed for file.
func (d Digests) SHA512(file string) (string, error) {
	h, ok := d["SHA512"][file]
	if !ok {
		return "", fmt.Errorf("DIGESTS lists no SHA512 for %s", file)
	}
	if len(h) != 128 {
		return "", fmt.Errorf("DIGESTS: SHA512 of %s has %d hex digits, want 128", file, len(h))
	}
	return h, nil
}
