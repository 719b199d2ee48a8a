package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/fleet"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// fleetFlags are the flags plan and prune share; they override the --config file's values.
type fleetFlags struct {
	config string
	c      fleet.Config
}

func addFleetFlags(f *pflag.FlagSet, ff *fleetFlags) {
	f.StringVar(&ff.config, "config", "", "fleet file (YAML): channels, kubernetesVersions, methods, clouds, arch, releaseServer, kubernetesMirror, properties, buildArgs, outputDir, keep; flags override it")
	f.StringArrayVar(&ff.c.Channels, "channel", nil, "channels, repeatable or comma-separated (default stable)")
	f.StringArrayVar(&ff.c.KubernetesVersions, "kubernetes-version", nil, "Kubernetes versions, repeatable or comma-separated")
	f.StringArrayVar(&ff.c.Methods, "method", nil, "build methods: packer, sysext (default sysext)")
	f.StringArrayVar(&ff.c.Clouds, "cloud", nil, "clouds.yaml names, repeatable or comma-separated")
	f.StringVar(&ff.c.Arch, "arch", "", "architecture: "+strings.Join(release.Arches, ", ")+" (default amd64)")
}

func newPlanCommand() *cobra.Command {
	var (
		ff                  fleetFlags
		format, gitlabImage string
		runBuilds           bool
		net                 httpx.Options
	)
	cmd := &cobra.Command{
		Use:   "plan --kubernetes-version V[,V] --cloud C[,C]",
		Short: "List the images each cloud is missing (channels x Kubernetes versions x methods), as text or a CI matrix",
		Long: `Resolve each channel's current Flatcar release and each Kubernetes version, look every
cloud's Glance up once, and say for every (channel, Kubernetes version, method) and cloud whether
the image build would make is there:

  present   an active image of that name (and, with --output-dir, the content of the local build record)
  missing   nothing of this channel, Kubernetes minor and method
  stale     only older images of it (an older Flatcar or Kubernetes patch): a new build is due
  differs   the name exists with other content than the local build record says
  building  an upload of the name is under way
  error     the cloud could not be asked (the other clouds' cells still count; exit 1)

-o json prints the rows and a GitHub Actions matrix ({"include": [{channel, flatcar_version,
kubernetes_version, method, image_name, clouds}]}) for strategy.matrix; --format github prints the
matrix alone, --format gitlab a child pipeline whose parallel:matrix entries are the
FLATCAR_CAPO_* variables build reads, its jobs in the image --gitlab-image names (flatcar-capo's
shell image: GitLab Runner pipes a job's script into sh in the image; in a GitLab job the job's own
image, $CI_JOB_IMAGE, by default). --build runs the missing builds here, one after another,
each uploading to the clouds that lack it. A --config file holds the same lists so a CI job is one line.`,
		Example: `  flatcar-capo plan --channel stable,beta --kubernetes-version v1.34.6,v1.35.2 --method sysext --cloud east,west
  flatcar-capo plan --config fleet.yaml --format github > matrix.json
  flatcar-capo plan --config fleet.yaml --format gitlab --gitlab-image registry.example.com/flatcar-capo:v1.2.3-shell > builds.yml
  flatcar-capo plan --config fleet.yaml --build`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			net.Log = cmd.ErrOrStderr()
			rep, err := fleet.PlanFleet(cmd.Context(), fleet.PlanRequest{ConfigFile: ff.config, Flags: ff.c, Format: format,
				GitLabImage: gitlabImage, Network: net, Build: runBuilds, Log: cmd.ErrOrStderr()})
			if rep == nil {
				return err
			}
			return cmp.Or(printFleetPlan(cmd, format, gitlabImage, rep), err)
		},
	}
	f := cmd.Flags()
	addFleetFlags(f, &ff)
	f.StringVar(&ff.c.ReleaseServer, "release-server", "", "release server or mirror, as for release (default "+release.DefaultServer+")")
	f.StringVar(&ff.c.KubernetesMirror, "kubernetes-mirror", "", "Kubernetes release mirror, passed to the builds --build runs")
	f.StringVar(&ff.c.OutputDir, "output-dir", "", "where build records live (a present image whose content differs from its record is 'differs'); --build builds there")
	f.StringArrayVar(&ff.c.Properties, "property", nil, "image property KEY=VALUE for the builds --build runs (repeatable)")
	f.StringArrayVar(&ff.c.BuildArgs, "build-arg", nil, "extra flag for the builds --build runs, e.g. --build-arg=--disk-size=12G (repeatable)")
	f.StringVar(&format, "format", "", "print only a CI matrix: github (strategy.matrix JSON) or gitlab (a child pipeline)")
	f.StringVar(&gitlabImage, "gitlab-image", "", "container image the --format gitlab jobs run in: flatcar-capo's shell image as you pushed it (make dist's flatcar-capo:shell); in a GitLab job $CI_JOB_IMAGE by default")
	alsoFromEnv(f, "gitlab-image", "CI_JOB_IMAGE")
	f.BoolVar(&runBuilds, "build", false, "run the missing builds on this machine, one after another")
	addNetworkFlags(f, &net)
	addOutputFlag(f)
	return cmd
}

func printFleetPlan(cmd *cobra.Command, format, gitlabImage string, rep *fleet.PlanReport) error {
	w, res := cmd.OutOrStdout(), rep.Result
	switch format {
	case "github":
		return json.NewEncoder(w).Encode(rep.Matrix)
	case "gitlab":
		enc := json.NewEncoder(w) // JSON is YAML: GitLab reads it as the child pipeline
		enc.SetIndent("", "  ")
		return enc.Encode(res.GitLabPipeline(gitlabImage))
	}
	return report(cmd, rep, func(w io.Writer) error {
		stderr := cmd.ErrOrStderr()
		for _, e := range rep.Errors {
			fmt.Fprintf(stderr, "error: %s\n", e)
		}
		if len(res.Rows) == 0 {
			fmt.Fprintln(w, "nothing to plan")
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		clouds := []string{}
		for _, c := range res.Rows[0].Clouds {
			clouds = append(clouds, c.Cloud)
		}
		fmt.Fprintf(tw, "CHANNEL\tFLATCAR\tKUBERNETES\tMETHOD\tIMAGE\t%s\n", strings.ToUpper(strings.Join(clouds, "\t")))
		for _, r := range res.Rows {
			var cells []string
			for _, c := range r.Clouds {
				cell := c.Status
				if c.Status == fleet.Stale {
					cell += " (" + c.Newest + ")"
				}
				cells = append(cells, cell)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Channel, r.FlatcarVersion, r.KubernetesVersion, r.Method, r.ImageName, strings.Join(cells, "\t"))
		}
		tw.Flush()
		if rep.Todo == 0 {
			fmt.Fprintf(w, "nothing to do: %s\n", res.Summary())
		} else {
			fmt.Fprintf(w, "%d build(s) to run: %s\n", rep.Todo, res.Summary())
		}
		for _, b := range rep.Builds {
			fmt.Fprintf(w, "built %s for %s: exit %d\n", b.ImageName, strings.Join(b.Clouds, ","), b.ExitCode)
		}
		return nil
	})
}
