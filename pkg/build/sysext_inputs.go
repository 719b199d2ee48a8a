package build

import (
	"context"
	"fmt"
	"os"
)

// sysextInputs names each --sysext by its content, "<sha512>:<FILE|URL>": a changed file at the
// same path, or a URL serving new content, is another input and rebuilds. URLs are downloaded
// into dir (made when needed; "" for a dry run, which keeps the URLs as given).
func sysextInputs(ctx context.Context, o *Options, dir func() (string, error)) ([]string, map[string]string, error) {
	var in []string
	files := map[string]string{}
	for _, s := range o.Sysext {
		p := s
		if isURL(s) {
			if o.DryRun {
				in = append(in, s)
				continue
			}
			d, err := dir()
			if err != nil {
				return nil, nil, err
			}
			if p, err = download(ctx, o, s, d); err != nil {
				return nil, nil, err
			}
			files[s] = p
		}
		sum, _, err := sha512File(p)
		if err != nil {
			return nil, nil, fmt.Errorf("--sysext %s: %w", s, err)
		}
		in = append(in, sum+":"+s)
	}
	return in, files, nil
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
