package fleet

import (
	"fmt"
	"strings"
	"unicode"
)

// MatrixEntry is one job of a CI matrix: one `flatcar-capo build` with the clouds to upload to.
// The keys are what a GitHub Actions job reads as matrix.channel, matrix.kubernetes_version, ...
type MatrixEntry struct {
	Channel           string   `json:"channel"`
	FlatcarVersion    string   `json:"flatcar_version"`
	KubernetesVersion string   `json:"kubernetes_version"`
	Method            string   `json:"method"`
	ImageName         string   `json:"image_name"`
	Clouds            []string `json:"clouds"`
}

// GitHubMatrix is the value for `strategy.matrix: ${{ fromJSON(needs.plan.outputs.matrix) }}`.
// GitHub refuses a matrix with an empty include, so a job using it checks `todo` first.
type GitHubMatrix struct {
	Include []MatrixEntry `json:"include"`
}

// Matrix is the rows to build as a GitHub Actions matrix.
func (r *Result) Matrix() GitHubMatrix {
	m := GitHubMatrix{Include: []MatrixEntry{}}
	for _, row := range r.Todo() {
		m.Include = append(m.Include, MatrixEntry{Channel: row.Channel, FlatcarVersion: row.FlatcarVersion,
			KubernetesVersion: row.KubernetesVersion, Method: row.Method, ImageName: row.ImageName, Clouds: row.Needed()})
	}
	return m
}

// GitLabPipeline is a child pipeline for GitLab's `trigger: include: artifact:`: GitLab fixes
// `parallel: matrix` when a pipeline is created, so a computed matrix must come as a generated
// pipeline. Each matrix entry is the environment `flatcar-capo build` reads its flags from
// (FLATCAR_CAPO_CLOUD is a comma-separated list), so the job's script is the bare command.
func (r *Result) GitLabPipeline(image string) map[string]any {
	var entries []map[string]string
	for _, e := range r.Matrix().Include {
		entries = append(entries, map[string]string{
			"FLATCAR_CAPO_CHANNEL": e.Channel, "FLATCAR_CAPO_VERSION": e.FlatcarVersion,
			"FLATCAR_CAPO_KUBERNETES_VERSION": e.KubernetesVersion, "FLATCAR_CAPO_METHOD": e.Method,
			"FLATCAR_CAPO_IMAGE_NAME": e.ImageName, "FLATCAR_CAPO_CLOUD": strings.Join(e.Clouds, ","),
		})
	}
	if len(entries) == 0 {
		// GitLab refuses a pipeline without jobs; this one says why it does nothing.
		return map[string]any{"nothing-to-build": map[string]any{"image": image,
			"script": []string{"echo 'flatcar-capo plan: every image is present'"}}}
	}
	return map[string]any{"build": map[string]any{"image": image, "script": []string{"flatcar-capo build"},
		"parallel": map[string]any{"matrix": entries}}}
}

// validGitLabImage checks the image a child pipeline's jobs run in: GitLab Runner pipes each job's
// script into a shell in it, so it must be flatcar-capo's shell image, named as the runner pulls it.
func validGitLabImage(ref string) error {
	if ref == "" {
		return fmt.Errorf("a --format gitlab pipeline needs the image its jobs run in: give --gitlab-image REF (or FLATCAR_CAPO_GITLAB_IMAGE), " +
			"the flatcar-capo:shell image of make dist pushed to a registry your runners pull from, e.g. registry.example.com/flatcar-capo:v1.2.3-shell " +
			"(in a GitLab job the job's own image, $CI_JOB_IMAGE, is the default)")
	}
	if strings.IndexFunc(ref, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return fmt.Errorf("%q is not an image reference (it has a space or control character)", ref)
	}
	return nil
}
