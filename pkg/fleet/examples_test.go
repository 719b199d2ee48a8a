package fleet_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/fleet"
)

func example(t *testing.T, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{testutil.RepoRoot(), "examples"}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildFlags are the flags `flatcar-capo build --help` lists.
func buildFlags(t *testing.T) map[string]bool {
	t.Helper()
	help := testutil.Run(t, "build", "--help").MustSucceed(t).Stdout
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(help, -1) {
		flags[m[1]] = true
	}
	return flags
}

// envFlag is the flag a FLATCAR_CAPO_ variable sets.
func envFlag(v string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(v, "FLATCAR_CAPO_")), "_", "-")
}

// matrixKeys are the keys of a real plan's matrix entries.
func matrixKeys(t *testing.T) map[string]bool {
	t.Helper()
	r := &fleet.Result{Rows: []fleet.Row{{Channel: "stable", FlatcarVersion: "1.2.3", KubernetesVersion: "v1.35.2", Method: "sysext",
		ImageName: "n", Clouds: []fleet.CloudState{{Cloud: "east", Status: fleet.Missing}}}}}
	b, _ := json.Marshal(r.Matrix())
	var m struct{ Include []map[string]any }
	json.Unmarshal(b, &m)
	keys := map[string]bool{}
	for k := range m.Include[0] {
		keys[k] = true
	}
	return keys
}

func TestExampleFleetConfigLoads(t *testing.T) {
	path := filepath.Join(testutil.RepoRoot(), "examples", "fleet.yaml")
	c, err := fleet.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || len(c.Clouds) == 0 {
		t.Fatalf("examples/fleet.yaml: %v %+v", err, c)
	}
}

// TestGitHubActionsExample: the workflow parses, its build job's matrix is the plan job's output
// of `plan --format github`, every matrix.KEY it reads is a key plan writes, and every flag its
// build line passes is one build has.
func TestGitHubActionsExample(t *testing.T) {
	var wf struct {
		Jobs map[string]struct {
			Needs    any               `yaml:"needs"`
			Outputs  map[string]string `yaml:"outputs"`
			Strategy struct {
				Matrix string `yaml:"matrix"`
			} `yaml:"strategy"`
			Steps []struct {
				ID  string            `yaml:"id"`
				Run string            `yaml:"run"`
				Env map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	raw := example(t, "github-actions.yml")
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	plan, build := wf.Jobs["plan"], wf.Jobs["build"]
	if build.Strategy.Matrix != "${{ fromJSON(needs.plan.outputs.matrix) }}" || plan.Outputs["matrix"] != "${{ steps.plan.outputs.matrix }}" {
		t.Fatalf("the build matrix is not the plan job's output: %q / %q", build.Strategy.Matrix, plan.Outputs["matrix"])
	}
	var planRun string
	for _, s := range plan.Steps {
		if s.ID == "plan" {
			planRun = s.Run
		}
	}
	if !strings.Contains(planRun, "--format github > matrix.json") || !strings.Contains(planRun, `echo "matrix=$(cat matrix.json)" >> "$GITHUB_OUTPUT"`) {
		t.Errorf("the plan step does not publish plan --format github as the matrix output:\n%s", planRun)
	}
	if strings.Contains(string(raw), "go install") {
		t.Error("the workflow go installs flatcar-capo: its module path is not published; install make dist's binary")
	}
	installs := 0
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			if strings.Contains(s.Run, "flatcar-capo-linux-amd64") {
				installs++
				runInstallStep(t, s.Run, s.Env["DIST"])
			}
		}
	}
	if installs != len(wf.Jobs) {
		t.Errorf("%d of the %d jobs install flatcar-capo from make dist's files", installs, len(wf.Jobs))
	}
	keys, flags := matrixKeys(t), buildFlags(t)
	for _, m := range regexp.MustCompile(`\$\{\{ *(?:join\()?matrix\.([a-z_]+)`).FindAllStringSubmatch(string(raw), -1) {
		if !keys[m[1]] {
			t.Errorf("the workflow reads matrix.%s, which plan does not write (keys %v)", m[1], keys)
		}
	}
	for _, s := range build.Steps {
		if !strings.HasPrefix(s.Run, "flatcar-capo build") {
			continue
		}
		for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(s.Run, -1) {
			if !flags[m[1]] {
				t.Errorf("the build step passes --%s, which build does not have", m[1])
			}
		}
		for v := range s.Env {
			if strings.HasPrefix(v, "FLATCAR_CAPO_") && !flags[envFlag(v)] {
				t.Errorf("the build step sets %s, which no build flag reads", v)
			}
		}
	}
}

// distFiles are the files make dist writes (the Makefile's DIST_FILES, and SHA256SUMS).
func distFiles(t *testing.T) map[string]bool {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^DIST_FILES := (.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no DIST_FILES")
	}
	files := map[string]bool{"SHA256SUMS": true}
	for _, f := range strings.Fields(string(m[1])) {
		files[f] = true
	}
	return files
}

// runInstallStep runs a workflow's install step with bash as the runner would, against a
// 127.0.0.1 server holding what make dist writes (the test's flatcar-capo binary and its
// SHA256SUMS): flatcar-capo then runs from the directory the step adds to GITHUB_PATH. With
// the binary changed on the server, the step fails.
func runInstallStep(t *testing.T, script, distEnv string) {
	t.Helper()
	testutil.RequireTools(t, "bash", "curl", "sha256sum")
	if distEnv != "${{ vars.FLATCAR_CAPO_DIST_URL }}" {
		t.Errorf("the install step's DIST is %q, not the FLATCAR_CAPO_DIST_URL variable", distEnv)
	}
	dist := t.TempDir()
	bin, err := os.ReadFile(testutil.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dist, "flatcar-capo-linux-amd64"), bin, 0o644)
	sums := fmt.Sprintf("%s  flatcar-capo-linux-amd64\n", testutil.SHA256File(t, filepath.Join(dist, "flatcar-capo-linux-amd64")))
	os.WriteFile(filepath.Join(dist, "SHA256SUMS"), []byte(sums), 0o644)
	for _, m := range regexp.MustCompile(`\$DIST/([A-Za-z0-9._-]+)`).FindAllStringSubmatch(script, -1) {
		if !distFiles(t)[m[1]] {
			t.Errorf("the install step downloads %s, which make dist does not write", m[1])
		}
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dist)))
	defer srv.Close()
	run := func() (string, string, error) {
		runner := t.TempDir()
		ghPath := filepath.Join(runner, "github_path")
		cmd := exec.Command("bash", "-e", "-c", script)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + runner, "RUNNER_TEMP=" + runner, "GITHUB_PATH=" + ghPath, "DIST=" + srv.URL}
		out, err := cmd.CombinedOutput()
		p, _ := os.ReadFile(ghPath)
		return string(out), strings.TrimSpace(string(p)), err
	}
	out, added, err := run()
	if err != nil {
		t.Fatalf("the install step fails: %v\n%s", err, out)
	}
	if v, err := exec.Command(filepath.Join(added, "flatcar-capo"), "version").CombinedOutput(); err != nil {
		t.Errorf("flatcar-capo from the step's GITHUB_PATH entry %q: %v\n%s", added, err, v)
	}
	os.WriteFile(filepath.Join(dist, "flatcar-capo-linux-amd64"), append(bin, 0), 0o644)
	if out, _, err := run(); err == nil {
		t.Errorf("the install step accepts a binary that does not match SHA256SUMS:\n%s", out)
	}
}

// TestGitLabExample: the pipeline triggers the child pipeline the plan job writes with
// --format gitlab, that child's matrix variables are flags build reads, every job runs in the
// image FLATCAR_CAPO_GITLAB_IMAGE names (plan's --gitlab-image), and no CI/CD variable the
// example asks for sets a flag of the child's build jobs, which see them too. (scripts/image's
// TestGitLabJobsInShellImage runs the jobs in the image.)
func TestGitLabExample(t *testing.T) {
	type job struct {
		Image     string   `yaml:"image"`
		Script    []string `yaml:"script"`
		Artifacts struct {
			Paths []string `yaml:"paths"`
		} `yaml:"artifacts"`
		Trigger struct {
			Include []struct {
				Artifact string `yaml:"artifact"`
				Job      string `yaml:"job"`
			} `yaml:"include"`
		} `yaml:"trigger"`
	}
	var ci struct {
		Default struct {
			Image string `yaml:"image"`
		} `yaml:"default"`
		Plan  job `yaml:"plan"`
		Build job `yaml:"build"`
		Prune job `yaml:"prune"`
	}
	raw := example(t, "gitlab-ci.yml")
	if err := yaml.Unmarshal(raw, &ci); err != nil {
		t.Fatal(err)
	}
	plan, build := ci.Plan, ci.Build
	for name, j := range map[string]job{"plan": ci.Plan, "prune": ci.Prune} {
		if img := cmp.Or(j.Image, ci.Default.Image); img != "$FLATCAR_CAPO_GITLAB_IMAGE" {
			t.Errorf("job %s runs in %q, not $FLATCAR_CAPO_GITLAB_IMAGE", name, img)
		}
	}
	planHelp := testutil.Run(t, "plan", "--help").MustSucceed(t).Stdout
	if !strings.Contains(planHelp, "--"+envFlag("FLATCAR_CAPO_GITLAB_IMAGE")+" ") {
		t.Error("plan has no flag FLATCAR_CAPO_GITLAB_IMAGE sets: the child pipeline would not run in the shell image")
	}
	if len(build.Trigger.Include) != 1 || build.Trigger.Include[0].Job != "plan" || len(plan.Artifacts.Paths) != 1 ||
		build.Trigger.Include[0].Artifact != plan.Artifacts.Paths[0] {
		t.Fatalf("build does not trigger the plan job's artifact: %+v / %+v", build.Trigger, plan.Artifacts)
	}
	if !strings.Contains(strings.Join(plan.Script, "\n"), "--format gitlab") || !strings.Contains(strings.Join(plan.Script, "\n"), "> "+plan.Artifacts.Paths[0]) {
		t.Errorf("the plan job does not write plan --format gitlab to its artifact: %v", plan.Script)
	}
	r := &fleet.Result{Rows: []fleet.Row{{Channel: "stable", FlatcarVersion: "1.2.3", KubernetesVersion: "v1.35.2", Method: "sysext",
		ImageName: "n", Clouds: []fleet.CloudState{{Cloud: "east", Status: fleet.Missing}}}}}
	child := r.GitLabPipeline("img")["build"].(map[string]any)
	flags := buildFlags(t)
	for v := range child["parallel"].(map[string]any)["matrix"].([]map[string]string)[0] {
		if !flags[envFlag(v)] {
			t.Errorf("the child pipeline sets %s, which no build flag reads", v)
		}
	}
	for _, v := range regexp.MustCompile(`FLATCAR_CAPO_[A-Z0-9_]+`).FindAllString(string(raw), -1) {
		if flags[envFlag(v)] {
			t.Errorf("the example's variable %s is also build's --%s: the child's build jobs would read it", v, envFlag(v))
		}
	}
}

// TestKubernetesExamples: the manifests decode strictly into the Kubernetes API types and run
// as a non-root user with a read-only root filesystem, an emptyDir work directory and
// clouds.yaml from a Secret; their arguments are real flags.
func TestKubernetesExamples(t *testing.T) {
	flags := buildFlags(t)
	check := func(file string, spec corev1.PodSpec) {
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: the pod does not run as non-root", file)
		}
		vols := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			vols[v.Name] = v
		}
		for _, c := range spec.Containers {
			if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("%s: container %s has a writable root filesystem", file, c.Name)
			}
			var work, clouds bool
			for _, m := range c.VolumeMounts {
				v := vols[m.Name]
				work = work || (m.MountPath == "/work" && v.EmptyDir != nil)
				clouds = clouds || (v.Secret != nil && m.MountPath == "/etc/openstack")
			}
			if !work || !clouds {
				t.Errorf("%s: container %s lacks the emptyDir /work (%v) or the clouds.yaml Secret (%v)", file, c.Name, work, clouds)
			}
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "FLATCAR_CAPO_") && !flags[envFlag(e.Name)] {
					t.Errorf("%s: %s sets no build flag", file, e.Name)
				}
			}
			if len(c.Args) == 0 {
				t.Errorf("%s: container %s has no args", file, c.Name)
			} else {
				r := testutil.Run(t, append(c.Args[:1:1], "--help")...).MustSucceed(t)
				for _, a := range c.Args[1:] {
					if strings.HasPrefix(a, "--") && !strings.Contains(r.Stdout, a) {
						t.Errorf("%s: %s has no flag %s", file, c.Args[0], a)
					}
				}
			}
		}
	}
	var kust struct {
		Resources []string `yaml:"resources"`
		Images    []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(example(t, "kubernetes", "kustomization.yaml"), &kust); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kust.Resources, []string{"cronjob.yaml"}) || len(kust.Images) != 1 || kust.Images[0].NewName == "" || kust.Images[0].NewTag == "" {
		t.Fatalf("kustomization.yaml: %+v, want cronjob.yaml with the image set", kust)
	}
	// The manifests name the image kustomization.yaml maps (or kubectl set image replaces): never
	// a reference such as flatcar-capo:latest that nobody publishes.
	imageOf := func(file string, spec corev1.PodSpec) {
		for _, c := range spec.Containers {
			if c.Image != kust.Images[0].Name {
				t.Errorf("%s: container %s runs %q, not the name kustomization.yaml sets (%q)", file, c.Name, c.Image, kust.Images[0].Name)
			}
		}
	}
	if readme := string(example(t, "kubernetes", "README.md")); !strings.Contains(readme, "kubectl create -f") ||
		!strings.Contains(readme, "kubectl apply -k") || !strings.Contains(readme, "job.yaml build=") {
		t.Error("examples/kubernetes/README.md does not say how to set the image and that job.yaml (generateName) needs kubectl create")
	}
	for _, doc := range strings.Split(string(example(t, "kubernetes", "cronjob.yaml")), "\n---\n") {
		var meta struct{ Kind string }
		sigsyaml.Unmarshal([]byte(doc), &meta)
		switch meta.Kind {
		case "CronJob":
			var cj batchv1.CronJob
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &cj); err != nil {
				t.Fatalf("cronjob.yaml: %v", err)
			}
			check("cronjob.yaml", cj.Spec.JobTemplate.Spec.Template.Spec)
			imageOf("cronjob.yaml", cj.Spec.JobTemplate.Spec.Template.Spec)
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				t.Fatalf("cronjob.yaml ConfigMap: %v", err)
			}
			path := filepath.Join(t.TempDir(), "fleet.yaml")
			os.WriteFile(path, []byte(cm.Data["fleet.yaml"]), 0o644)
			if c, err := fleet.LoadConfig(path); err != nil || c.Validate() != nil {
				t.Errorf("the ConfigMap's fleet.yaml: %v", err)
			}
		default:
			t.Errorf("cronjob.yaml: unexpected kind %q", meta.Kind)
		}
	}
	var job batchv1.Job
	if err := sigsyaml.UnmarshalStrict(example(t, "kubernetes", "job.yaml"), &job); err != nil {
		t.Fatalf("job.yaml: %v", err)
	}
	check("job.yaml", job.Spec.Template.Spec)
	imageOf("job.yaml", job.Spec.Template.Spec)
	if job.Spec.Template.Spec.Containers[0].Name != "build" {
		t.Error("job.yaml's container is not named build, which the README's kubectl set image names")
	}
}
