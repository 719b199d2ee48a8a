//go:build image

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// runnerDetectShell is the command GitLab Runner's docker executor gives the job container (after
// the image's entrypoint); the job script arrives on its stdin (gitlab-runner shells/bash.go).
const runnerDetectShell = `if [ -x /usr/local/bin/bash ]; then
	exec /usr/local/bin/bash $@
elif [ -x /usr/bin/bash ]; then
	exec /usr/bin/bash $@
elif [ -x /bin/bash ]; then
	exec /bin/bash $@
elif [ -x /usr/local/bin/sh ]; then
	exec /usr/local/bin/sh $@
elif [ -x /usr/bin/sh ]; then
	exec /usr/bin/sh $@
elif [ -x /bin/sh ]; then
	exec /bin/sh $@
elif [ -x /busybox/sh ]; then
	exec /busybox/sh $@
else
	echo shell not found
	exit 1
fi
`

// gitlabJob is the part of a GitLab job this test runs.
type gitlabJob struct {
	Image    string   `yaml:"image" json:"image"`
	Script   []string `yaml:"script" json:"script"`
	Stage    string   `yaml:"stage" json:"stage"`
	Parallel struct {
		Matrix []map[string]string `yaml:"matrix" json:"matrix"`
	} `yaml:"parallel" json:"parallel"`
	Trigger *struct {
		Include []struct {
			Artifact string `yaml:"artifact"`
			Job      string `yaml:"job"`
		} `yaml:"include"`
	} `yaml:"trigger"`
}

// gitlabRunner runs jobs as GitLab Runner's docker executor does, in a project directory.
type gitlabRunner struct {
	project string            // the checkout, /builds/project in the container
	vars    map[string]string // CI/CD variables (File ones already as their path in the container)
	mounts  []string          // -v of the stand-ins' files
}

const projectDir = "/builds/group/project"

// run runs one job's script in image with extra variables (a matrix entry) and returns its output.
func (g *gitlabRunner) run(t *testing.T, image string, script []string, extra map[string]string) (string, error) {
	t.Helper()
	// What the runner's generated script does around the job's lines: stop at the first failing
	// command, start in the project directory, echo each command.
	var sh strings.Builder
	fmt.Fprintf(&sh, "set -eo pipefail\ncd %s\n", projectDir)
	for _, line := range script {
		fmt.Fprintf(&sh, "echo %s\n%s\n", shellQuote("$ "+line), line)
	}
	args := []string{"run", "--rm", "-i", "--network", "host", "-v", g.project + ":" + projectDir}
	for _, m := range g.mounts {
		args = append(args, "-v", m)
	}
	env := map[string]string{"CI": "true", "GITLAB_CI": "true", "CI_PROJECT_DIR": projectDir, "CI_JOB_IMAGE": image}
	for _, vs := range []map[string]string{g.vars, extra} {
		for k, v := range vs {
			env[k] = v
		}
	}
	for k, v := range env {
		args = append(args, "-e", k+"="+v)
	}
	args = append(args, image, "sh", "-c", runnerDetectShell)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", podmanRun(args)...)
	cmd.Stdin = strings.NewReader(sh.String())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// expand replaces $NAME and ${NAME} with the CI/CD variables, as GitLab expands `image:`.
func (g *gitlabRunner) expand(s string) string {
	return os.Expand(s, func(k string) string { return g.vars[k] })
}

// TestGitLabJobsInShellImage (make test-image): examples/gitlab-ci.yml's pipeline, run job by job
// as GitLab Runner's docker executor runs it: the job's image (flatcar-capo:shell from
// bin/image-shell.tar, under the registry name a user pushes it to) with its entrypoint, the runner's
// shell-detecting `sh -c` as the command and the job script on stdin, the checkout (world-writable,
// as the runner's umask 0000 leaves it) as working directory and the CI/CD variables the example
// asks for in the environment. The plan job's artifact is the child pipeline: its build jobs, one
// per matrix entry, run next, then prune; against the stand-in release server and Kubernetes
// mirror and the real Keystone + Glance on 127.0.0.1 (as CI/CD variables set the mirrors).
func TestGitLabJobsInShellImage(t *testing.T) {
	testutil.RequireTools(t, "podman", "uwsgi", "keystone-manage", "glance-api", "mkfs.ext4", "mkfs.btrfs")
	testutil.RequireRoot(t, "rootful podman")
	archive := filepath.Join(testutil.RepoRoot(), "bin", "image-shell.tar")
	out, err := exec.Command("podman", "load", "-i", archive).CombinedOutput()
	if err != nil {
		t.Fatalf("podman load: %v\n%s(run make image first; make test-image does)", err, out)
	}
	if !strings.Contains(string(out), "flatcar-capo:shell") {
		t.Fatalf("podman load did not load flatcar-capo:shell:\n%s", out)
	}
	const pushed = "registry.example.com/flatcar-capo:v1.2.3-shell" // as the user pushed it
	if out, err := exec.Command("podman", "tag", "localhost/flatcar-capo:shell", pushed).CombinedOutput(); err != nil {
		t.Fatalf("podman tag: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", pushed).Run() })

	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	stack := testutil.StartOpenStack(t, filepath.Join(dir, "openstack"))
	si := newStandIns(t, dir, kubetest.New(t, kubernetes.Options{}))
	version := releaseVersion

	// The checkout: the user's fleet.yaml and a clusters/ directory prune protects.
	project := filepath.Join(dir, "project")
	os.MkdirAll(filepath.Join(project, "clusters"), 0o777)
	os.Chmod(project, 0o777)
	os.Chmod(filepath.Join(project, "clusters"), 0o777)
	os.WriteFile(filepath.Join(project, "fleet.yaml"), []byte("channels: [stable]\nkubernetesVersions: [\"1.33\"]\nmethods: [sysext]\nclouds: [local]\nkeep: 2\n"), 0o666)
	clouds := stack().CloudsYAML
	os.Chmod(filepath.Dir(clouds), 0o755)
	os.Chmod(clouds, 0o644)

	g := &gitlabRunner{project: project,
		// The File variable's path as the runner makes it, beside the project directory.
		mounts: []string{clouds + ":" + projectDir + ".tmp/OS_CLIENT_CONFIG_FILE:ro", si.mount()},
		vars: map[string]string{
			"OS_CLIENT_CONFIG_FILE":     projectDir + ".tmp/OS_CLIENT_CONFIG_FILE",
			"FLATCAR_CAPO_GITLAB_IMAGE": pushed,
		}}
	for k, v := range si.env() { // more CI/CD variables: the stand-ins, set as a user sets mirrors
		g.vars[k] = v
	}

	raw, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "examples", "gitlab-ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var pipeline struct {
		Stages  []string `yaml:"stages"`
		Default struct {
			Image string `yaml:"image"`
		} `yaml:"default"`
	}
	jobs := map[string]gitlabJob{}
	if err := yaml.Unmarshal(raw, &pipeline); err != nil {
		t.Fatal(err)
	}
	var all map[string]yaml.Node
	yaml.Unmarshal(raw, &all)
	for name, node := range all {
		var j gitlabJob
		if node.Kind == yaml.MappingNode && node.Decode(&j) == nil && j.Stage != "" {
			jobs[name] = j
		}
	}
	if len(pipeline.Stages) == 0 || len(jobs) == 0 {
		t.Fatalf("examples/gitlab-ci.yml: stages %v, jobs %v", pipeline.Stages, jobs)
	}

	// The plain image is not one GitLab can run a script in: its entrypoint takes the runner's
	// command as flatcar-capo's arguments. (What the shell image is for.)
	if out, err := g.run(t, "localhost/flatcar-capo:latest", []string{"echo ran"}, nil); err == nil || strings.Contains(out, "\nran") {
		t.Errorf("the plain image ran a job script:\n%s", out)
	}

	ran := 0
	for _, stage := range pipeline.Stages {
		for name, j := range jobs {
			if j.Stage != stage {
				continue
			}
			if j.Trigger == nil {
				image := g.expand(cmp.Or(j.Image, pipeline.Default.Image))
				if image != pushed {
					t.Fatalf("job %s runs in %q, want the shell image %s", name, image, pushed)
				}
				out, err := g.run(t, image, j.Script, nil)
				if err != nil {
					t.Fatalf("job %s: %v\n%s", name, err, out)
				}
				t.Logf("job %s:\n%s", name, out)
				ran++
				continue
			}
			// The trigger job: the child pipeline is the artifact a job of an earlier stage wrote.
			for _, inc := range j.Trigger.Include {
				b, err := os.ReadFile(filepath.Join(project, inc.Artifact))
				if err != nil {
					t.Fatalf("job %s includes %s of job %s: %v", name, inc.Artifact, inc.Job, err)
				}
				var child map[string]gitlabJob
				if err := json.Unmarshal(b, &child); err != nil {
					t.Fatalf("the child pipeline %s: %v\n%s", inc.Artifact, err, b)
				}
				build, ok := child["build"]
				if !ok || len(build.Parallel.Matrix) != 1 || build.Image != pushed {
					t.Fatalf("the child pipeline should build the one missing image in %s:\n%s", pushed, b)
				}
				for _, entry := range build.Parallel.Matrix {
					out, err := g.run(t, build.Image, build.Script, entry)
					if err != nil {
						t.Fatalf("child job build %v: %v\n%s", entry, err, out)
					}
					t.Logf("child job build %v:\n%s", entry, out)
					ran++
				}
			}
		}
	}
	if ran < 3 {
		t.Errorf("%d jobs ran, want plan, the child's build and prune", ran)
	}
	// The child's build uploaded the image: Glance has it, active, and plan has nothing left to do.
	name := "flatcar-stable-" + version + "-kube-" + kubetest.Version + "-sysext"
	if _, err := os.Stat(filepath.Join(project, "output", name, name+".qcow2")); err != nil {
		t.Errorf("the build job's artifact is not in the checkout's output/: %v", err)
	}
	t.Setenv("OS_CLIENT_CONFIG_FILE", clouds)
	c, err := glance.Connect(context.Background(), "local")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := images.List(c.Image, images.ListOpts{Name: name}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	imgs, _ := images.ExtractImages(pages)
	if len(imgs) != 1 || imgs[0].Status != images.ImageStatusActive {
		t.Errorf("Glance has %d images named %s: %+v", len(imgs), name, imgs)
	}
	again, err := g.run(t, pushed, []string{"flatcar-capo plan --config fleet.yaml --format gitlab"}, nil)
	if err != nil || !bytes.Contains([]byte(again), []byte("nothing-to-build")) {
		t.Errorf("after the pipeline, plan still has work: %v\n%s", err, again)
	}
}
