package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
)

// PlanRequest is `plan`'s: the fleet file and the flags laid over it, the CI format asked for,
// the network of the release lookups, and whether to run the missing builds here.
type PlanRequest struct {
	ConfigFile          string
	Flags               Config
	Format, GitLabImage string // "" or github, or gitlab with the jobs' image
	Network             httpx.Options
	// Build runs `Program build` for each missing row (Program "": this program), its output on Log.
	Build   bool
	Program string
	Log     io.Writer
	// Resolver and Images stand in for the release servers and the clouds' Glance (nil: those).
	Resolver Resolver
	Images   PlanCatalog
}

// PlanCatalog lists a cloud's images and keeps, per cloud, those whose slot it could not tell.
type PlanCatalog interface {
	catalog
	UnsureImages() map[string][]Image
}

// UnsureImages is, per cloud asked, the tool-tagged images whose slot could not be told.
func (g *glanceCatalog) UnsureImages() map[string][]Image { return g.Unsure }

// PlanReport is the plan and what --build did; its JSON is `plan -o json`.
type PlanReport struct {
	Result *Result            `json:"-"`
	Rows   []Row              `json:"rows"`
	Todo   int                `json:"todo"`
	Matrix GitHubMatrix       `json:"matrix"`
	Errors []string           `json:"errors"`
	Builds []BuildRun         `json:"builds,omitempty"`
	Unsure map[string][]Image `json:"unknownImages,omitempty"`
}

// BuildRun is one build --build ran.
type BuildRun struct {
	ImageName string   `json:"imageName"`
	Clouds    []string `json:"clouds"`
	ExitCode  int      `json:"exitCode"`
}

// PlanFleet checks the request, plans (and with Build, runs the missing builds). The report
// is nil only when nothing could be looked at; with a report, the error is the plan's failure:
// errs.ErrInvalid when nothing could be planned (the input is wrong), else a cell or a build
// that failed.
func PlanFleet(ctx context.Context, r PlanRequest) (*PlanReport, error) {
	switch r.Format {
	case "", "github":
	case "gitlab":
		if err := validGitLabImage(r.GitLabImage); err != nil {
			return nil, errs.Invalidf("--gitlab-image: %v", err)
		}
	default:
		return nil, errs.Invalidf("invalid --format %q: github (a strategy.matrix) or gitlab (a child pipeline)", r.Format)
	}
	c, err := loadMerged(r.ConfigFile, r.Flags)
	if err != nil {
		return nil, err
	}
	if err := c.ValidateClouds(); err != nil {
		return nil, err
	}
	if err := r.Network.Validate(); err != nil {
		return nil, err
	}
	res := r.Resolver
	if res == nil {
		res = releaseResolver{Client: httpx.New(r.Network), Server: c.ReleaseServer, Arch: c.Arch, Mirror: c.KubernetesMirror}
	}
	cat := r.Images
	if cat == nil {
		cat = &glanceCatalog{}
	}
	plan := plan(ctx, c, res, cat)
	rep := &PlanReport{Result: plan, Rows: plan.Rows, Matrix: plan.Matrix(), Errors: []string{}, Unsure: cat.UnsureImages()}
	if rep.Rows == nil {
		rep.Rows = []Row{}
	}
	rep.Todo = len(rep.Matrix.Include)
	for _, e := range plan.Errors {
		rep.Errors = append(rep.Errors, e.Error())
	}
	if r.Build {
		rep.Builds = runBuilds(ctx, r.Program, cmp.Or(r.Log, io.Discard), c, plan.Todo())
	}
	var failures []error
	if perr := plan.Err(); perr != nil {
		if errors.Is(perr, errs.ErrInvalid) && len(plan.Rows) == 0 {
			return rep, perr // nothing could be planned: the input is what is wrong (exit 2)
		}
		failures = append(failures, errors.New(perr.Error())) // some rows were planned: a failure (exit 1)
	}
	for _, b := range rep.Builds {
		if b.ExitCode != 0 {
			failures = append(failures, fmt.Errorf("build of %s failed (exit %d)", b.ImageName, b.ExitCode))
		}
	}
	return rep, errors.Join(failures...)
}

// runBuilds runs `program build` for each row, as a CI job of the matrix would: the row's
// flags, its output on log. A failure is reported and the next goes on.
func runBuilds(ctx context.Context, program string, log io.Writer, c Config, todo []Row) []BuildRun {
	var err error
	if program == "" {
		program, err = os.Executable()
	}
	var results []BuildRun
	for i, row := range todo {
		clouds := (Row{Clouds: row.Clouds}).Needed()
		r := BuildRun{ImageName: row.ImageName, Clouds: clouds}
		args := []string{"build", "--channel", row.Channel, "--version", row.FlatcarVersion, "--arch", c.Arch,
			"--kubernetes-version", row.KubernetesVersion, "--method", row.Method, "--release-server", c.ReleaseServer}
		if c.KubernetesMirror != "" {
			args = append(args, "--kubernetes-mirror", c.KubernetesMirror)
		}
		if c.OutputDir != "" {
			args = append(args, "--output-dir", c.OutputDir)
		}
		for _, cl := range clouds {
			args = append(args, "--cloud", cl)
		}
		for _, p := range c.Properties {
			args = append(args, "--property", p)
		}
		args = append(args, c.BuildArgs...)
		fmt.Fprintf(log, "plan: build %d/%d: %s for %s\n", i+1, len(todo), row.ImageName, strings.Join(clouds, ", "))
		if err != nil {
			r.ExitCode = 1
			fmt.Fprintf(log, "plan: cannot find this program to run build: %v\n", err)
			results = append(results, r)
			continue
		}
		b := exec.CommandContext(ctx, program, args...)
		b.Stdout, b.Stderr = log, log
		if err := b.Run(); err != nil {
			r.ExitCode = 1
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() > 0 {
				r.ExitCode = ee.ExitCode()
			}
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	return results
}
