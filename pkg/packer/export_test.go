package packer

import "context"

// Validate plans the build, materialises the build directory (scripts and rendered template)
// and runs `packer validate` on it, as Build does first. Nothing boots.
func Validate(ctx context.Context, cfg Config) (PlanInfo, error) {
	pi, err := Plan(ctx, cfg)
	if err != nil {
		return pi, err
	}
	return pi, pi.validate(ctx, &condenser{log: func(string) {}})
}
