package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// sysextSource is one --sysext as the resolve step found it: the local file (a URL's download)
// and its sha512, the only hash of it the build makes (the record and the copy next to the
// artifact take it from here). ModTime tells whether the file changed after it was hashed.
type sysextSource struct {
	Path    string
	SHA512  string
	Bytes   int64
	ModTime time.Time
}

// sysextInputs names each --sysext by its content, "<sha512>:<file name|URL>": a changed file at the
// same path, or a URL serving new content, is another input and rebuilds. URLs are downloaded
// into dir (made when needed; "" for a dry run, which keeps the URLs as given).
func sysextInputs(ctx context.Context, o *Options, dir func() (string, error)) ([]string, map[string]sysextSource, error) {
	var in []string
	srcs := map[string]sysextSource{}
	for _, s := range o.Sysext {
		var src sysextSource
		if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
			if o.DryRun {
				in = append(in, redact.URL(s))
				continue
			}
			d, err := dir()
			if err != nil {
				return nil, nil, err
			}
			dl, err := download(ctx, o, s, d)
			if err != nil {
				return nil, nil, err
			}
			src = sysextSource{Path: dl.Path, SHA512: dl.Digest, Bytes: dl.Bytes} // hashed as it came in
		} else {
			sum, n, err := digest.SHA512(s)
			if err != nil {
				return nil, nil, fmt.Errorf("--sysext %s: %w", s, err)
			}
			src = sysextSource{Path: s, SHA512: sum, Bytes: n}
		}
		fi, err := os.Stat(src.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("--sysext %s: %w", redact.URL(s), err)
		}
		src.ModTime = fi.ModTime()
		srcs[s] = src
		name := redact.URL(s)
		if src.Path == s { // a local file: its name, not its build-host path (the sha512 decides)
			name = filepath.Base(s)
		}
		in = append(in, src.SHA512+":"+name)
	}
	return in, srcs, nil
}

// sysextDownloadDir makes the private directory for --sysext downloads once.
func (s *stepResolve) sysextDownloadDir() (string, error) {
	if s.sysextDir == "" {
		d, err := os.MkdirTemp("", "flatcar-capo-sysext-")
		if err != nil {
			return "", fmt.Errorf("cannot create a directory for the --sysext downloads: %w", err)
		}
		s.sysextDir = d
	}
	return s.sysextDir, nil
}
