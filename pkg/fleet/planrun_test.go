package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// planCatalog is fakeCatalog with the unsure images a Glance listing would keep.
type planCatalog struct{ fakeCatalog }

func (planCatalog) UnsureImages() map[string][]Image {
	return map[string][]Image{"east": {{Cloud: "east", ID: "odd"}}}
}

// PlanFleet is `plan` in one call: the format checked first, the plan and its matrix, --build
// running the planned builds with their flags, and the exit the failures give.
func TestPlanFleetPlansAndBuilds(t *testing.T) {
	res := fakeResolver{"stable": "4459.2.2", "k8s:1.35": "v1.35.2"}
	cat := planCatalog{fakeCatalog{"east": {img("east", "p", "stable", "4459.2.2", "v1.35.2", "sysext", 1)}}}
	flags := Config{Channels: []string{"stable"}, KubernetesVersions: []string{"1.35"}, Methods: []string{"sysext"},
		Clouds: []string{"east", "west"}, Arch: "amd64"}
	for name, r := range map[string]PlanRequest{
		"format":   {Format: "jenkins", Flags: flags},
		"gitlab":   {Format: "gitlab", GitLabImage: "not an image", Flags: flags},
		"no cloud": {Flags: Config{KubernetesVersions: []string{"1.35"}}},
	} {
		r.Resolver, r.Images = res, cat
		if rep, err := PlanFleet(context.Background(), r); rep != nil || !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: %v, %v; want no report and an invalid-input error", name, rep, err)
		}
	}

	rep, err := PlanFleet(context.Background(), PlanRequest{Flags: flags, Resolver: res, Images: cat})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Todo != 1 || len(rep.Rows) != 1 || rep.Matrix.Include[0].Clouds[0] != "west" || len(rep.Unsure["east"]) != 1 || rep.Builds != nil {
		t.Fatalf("report %+v: want one build to run, for west, and east's unsure image", rep)
	}

	dir := t.TempDir()
	program := filepath.Join(dir, "fake-flatcar-capo")
	os.WriteFile(program, []byte("#!/bin/sh\necho \"$@\" > "+filepath.Join(dir, "args")+"\nexit 3\n"), 0o700)
	var log strings.Builder
	rep, err = PlanFleet(context.Background(), PlanRequest{Flags: flags, Resolver: res, Images: cat, Build: true, Program: program, Log: &log})
	if err == nil || errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "failed (exit 3)") {
		t.Errorf("a failed build: err %v, want a failure naming exit 3", err)
	}
	if len(rep.Builds) != 1 || rep.Builds[0].ExitCode != 3 || !strings.Contains(log.String(), "plan: build 1/1") {
		t.Errorf("builds %+v, log %q", rep.Builds, log.String())
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if want := "build --channel stable --version 4459.2.2 --arch amd64 --kubernetes-version v1.35.2 --method sysext --release-server https://{channel}.release.flatcar-linux.net --cloud west"; strings.TrimSpace(string(args)) != want {
		t.Errorf("the build ran with %q, want %q", args, want)
	}

	// A channel the server lacks: still a report (rows of nothing), and the error naming it.
	rep, err = PlanFleet(context.Background(), PlanRequest{Flags: Config{Channels: []string{"beta"}, KubernetesVersions: []string{"1.35"}, Clouds: []string{"east"}},
		Resolver: res, Images: cat})
	if rep == nil || len(rep.Rows) != 0 || err == nil || !strings.Contains(err.Error(), "no such channel") {
		t.Errorf("nothing planned: %+v, %v; want a report and the error naming the channel", rep, err)
	}
}
