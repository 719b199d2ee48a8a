package packer

import (
	"context"
	"io"
	"strings"
)

// validate plans the build, materialises the build directory (scripts and rendered template)
// and runs `packer validate` on it, as Build does first. Nothing boots.
func validate(ctx context.Context, cfg Config) (PlanInfo, error) {
	pi, err := Plan(ctx, cfg)
	if err != nil {
		return pi, err
	}
	return pi, pi.validate(ctx, &condenser{log: io.Discard})
}

// lineWriter hands f each line written (the condenser writes one per Write), without its newline.
type lineWriter func(string)

func (f lineWriter) Write(p []byte) (int, error) {
	f(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
