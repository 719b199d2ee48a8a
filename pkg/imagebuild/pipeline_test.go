package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// The common steps around a VM-free stand-in method: fetch of a local base, Kubernetes
// downloads, OEM, inspect, qcow2, record, reuse, and the cleanup after failures.

// fakeMethod is a method whose "VM" only leaves the work copy as it is (or fails, or is cancelled).
type fakeStep struct {
	runs   *int
	fail   error
	cancel context.CancelFunc
}

func (s *fakeStep) Name() string { return "fake vm" }
func (s *fakeStep) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	*s.runs++
	if s.cancel != nil {
		s.cancel()
		<-ctx.Done()
		return multistep.ActionHalt
	}
	if s.fail != nil {
		return halt(state, s.fail)
	}
	if keyK8s.get(state) == nil {
		return halt(state, errors.New("no Kubernetes downloads before the method"))
	}
	return multistep.ActionContinue
}
func (s *fakeStep) Cleanup(multistep.StateBag) {}

var fake = &fakeStep{runs: new(int)}

// fakeMethod is the test's --method fake.
type fakeMethod struct{ noTools }

func (fakeMethod) Steps() []multistep.Step                     { return []multistep.Step{fake} }
func (fakeMethod) Plan(context.Context, *Options, *Plan) error { return nil }
func (fakeMethod) NodeFiles(*Options) ([]nodeFile, error)      { return nil, nil }

func init() { methods["fake"] = fakeMethod{} }

func testOptions(t testing.TB, base string) *Options {
	m := kubetest.New(t, kubernetes.Options{})
	ko := m.Options
	return &Options{Method: "fake", BaseImage: base, Release: release.Release{Channel: "stable", Version: "4459.2.0", Arch: "amd64"},
		Kubernetes: ko, CacheDir: filepath.Join(t.TempDir(), "cache"), OutputDir: filepath.Join(t.TempDir(), "out"), ToolVersion: "test"}
}

// testArtifact is where a build of testOptions writes its artifact (Run leaves o as it is).
func testArtifact(o *Options) string {
	return filepath.Join(o.OutputDir, "flatcar-stable-4459.2.0-kube-"+kubetest.Version+".qcow2")
}

func TestPipelineRecordsReusesAndForces(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4", "mkfs.vfat")
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	baseSum, _, _ := digest.SHA512(base)
	o := testOptions(t, base)
	*fake.runs, fake.fail, fake.cancel = 0, nil, nil
	rec, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	artifact := filepath.Join(o.OutputDir, rec.Artifacts[0].File)
	if artifact != testArtifact(o) {
		t.Fatalf("artifact %s", artifact)
	}
	// upload's reader sees the three keys.
	br, err := record.Load(artifact)
	if err != nil || br.FlatcarVersion != "4459.2.0" || br.KubernetesVersion != kubetest.Version || br.Arch != "amd64" {
		t.Fatalf("upload's view of the record: %+v %v", br, err)
	}
	sum, _, _ := digest.SHA512(artifact)
	if rec.Artifacts[0].SHA512 != sum || len(rec.Downloads) != 5 || rec.Method != "fake" || rec.Reused {
		t.Fatalf("record %+v", rec)
	}
	// Whatever the method, the record step writes the SBOM: every download with its sha256.
	sbomBytes, err := os.ReadFile(filepath.Join(o.OutputDir, rec.SBOM.File))
	if err != nil || br.SBOM == nil || br.SBOM.SHA256 != rec.SBOM.SHA256 || rec.SBOM.SHA256 == "" {
		t.Fatalf("SBOM %+v: %v", rec.SBOM, err)
	}
	for _, d := range rec.Downloads {
		if !strings.Contains(string(sbomBytes), `"content": "`+d.SHA256+`"`) {
			t.Errorf("the SBOM lacks %s's sha256 %s", d.Name, d.SHA256)
		}
	}
	img, err := disk.Open(artifact, false)
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := oem.ReadState(img)
	img.Close()
	if err != nil || st.Settings.OEMID != "openstack" || strings.Contains(st.Settings.LinuxAppend, "autologin") {
		t.Fatalf("OEM of the artifact: %+v %v", st.Settings, err)
	}
	if s, _, _ := digest.SHA512(base); s != baseSum {
		t.Fatal("the base image was modified")
	}
	entries, _ := os.ReadDir(o.OutputDir)
	if len(entries) != 3 {
		t.Fatalf("output dir holds %v, want the qcow2, its record and its SBOM", entries)
	}
	// Same inputs: reused, the method does not run.
	o2 := testOptions(t, base)
	o2.Kubernetes, o2.OutputDir, o2.CacheDir = o.Kubernetes, o.OutputDir, o.CacheDir
	rec2, err := Run(context.Background(), o2)
	if err != nil || !rec2.Reused || *fake.runs != 1 {
		t.Fatalf("re-run: reused=%v runs=%d err=%v", rec2 != nil && rec2.Reused, *fake.runs, err)
	}
	// A damaged artifact is not reused; --force always rebuilds.
	f, _ := os.OpenFile(artifact, os.O_WRONLY, 0)
	f.WriteAt([]byte("x"), 1000)
	f.Close()
	o3 := *o2
	o3.ImageName, o3.Log = "", nil
	if rec3, err := Run(context.Background(), &o3); err != nil || rec3.Reused || *fake.runs != 2 {
		t.Fatalf("damaged artifact: reused=%v runs=%d err=%v", rec3 != nil && rec3.Reused, *fake.runs, err)
	}
	o4 := o3
	o4.ImageName, o4.Force = "", true
	if rec4, err := Run(context.Background(), &o4); err != nil || rec4.Reused || *fake.runs != 3 {
		t.Fatalf("--force: runs=%d err=%v", *fake.runs, err)
	}
}

func TestPipelineFailureAndCancelLeaveNothing(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4", "mkfs.vfat")
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	for _, tc := range []struct {
		name string
		set  func(ctx context.Context) context.Context
		want string
	}{
		{"failure", func(ctx context.Context) context.Context { fake.fail = errors.New("the VM broke"); return ctx }, "the VM broke"},
		{"cancel", func(ctx context.Context) context.Context {
			ctx, cancel := context.WithCancel(ctx)
			fake.cancel = cancel
			return ctx
		}, context.Canceled.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*fake.runs, fake.fail, fake.cancel = 0, nil, nil
			defer func() { fake.fail, fake.cancel = nil, nil }()
			o := testOptions(t, base)
			_, err := Run(tc.set(context.Background()), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(o.OutputDir); !errors.Is(err, os.ErrNotExist) {
				entries, _ := os.ReadDir(o.OutputDir)
				t.Fatalf("output dir left with %v", entries)
			}
		})
	}
}

func TestPipelineNotReadyFailsWithoutArtifact(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4", "mkfs.vfat")
	// A leftover config.ign in the OEM partition wins over Nova user-data: NOT READY.
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, ExtraOEMFiles: map[string][]byte{"config.ign": []byte("{}")}})
	*fake.runs, fake.fail, fake.cancel = 0, nil, nil
	o := testOptions(t, base)
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "NOT READY") {
		t.Fatalf("err = %v, want NOT READY", err)
	}
	if _, err := os.Stat(testArtifact(o)); err == nil {
		t.Fatal("an artifact was left after NOT READY")
	}
}

func TestOptionsRejectBadValues(t *testing.T) {
	rel := release.Release{Channel: "stable", Version: "4459.2.0", Arch: "amd64"}
	if err := (&Options{Release: rel}).Validate(); err != nil {
		t.Fatalf("the valid options are refused: %v", err)
	}
	for _, o := range []Options{{Method: "vmware"}, {Base: "azure"}, {DiskSize: 12345}, {CPUs: -1}, {Kubernetes: kubernetes.Options{Kubernetes: "1.33.4"}},
		{OEM: "Open\"Stack"}, {OnExists: "maybe"}, {Release: release.Release{Channel: "stable", Version: "4459.2.0", Arch: "riscv"}}} {
		if o.Release == (release.Release{}) {
			o.Release = rel
		}
		if err := o.Validate(); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("%+v: %v, want a usage error", o, err)
		}
	}
}

// BenchmarkNonVMStepsFlatcarSized times every step but the VM on a Flatcar-sized disk (9 GiB
// sparse, ~1 GiB of data in ROOT): work copy, OEM, inspect, qcow2, record (scripts/bench/build.sh).
func BenchmarkNonVMStepsFlatcarSized(b *testing.B) {
	testutil.RequireTools(b, "mkfs.btrfs", "mkfs.ext4", "mkfs.vfat")
	tree := b.TempDir()
	chunk := make([]byte, 64<<20)
	for i := range chunk {
		chunk[i] = byte(i*7 + i>>9) // not all zero, so it is data, not a hole
	}
	for i := 0; i < 16; i++ { // 1 GiB
		if err := os.WriteFile(filepath.Join(tree, "data-"+string(rune('a'+i))), chunk, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	base := flatcardisk.Build(b, flatcardisk.Options{FirstBoot: true, DiskSize: 9 << 30, RootTree: tree})
	os.RemoveAll(tree)
	*fake.runs, fake.fail, fake.cancel = 0, nil, nil
	for i := 0; i < b.N; i++ {
		o := testOptions(b, base)
		o.Force = true
		rec, err := Run(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		var total, download float64
		for _, s := range rec.Steps {
			total += s.Seconds
			if s.Name == "kubernetes" {
				download += s.Seconds
			}
			fmt.Printf("  %-12s %7.2f s\n", s.Name, s.Seconds)
		}
		fmt.Printf("9 GiB sparse disk, 1 GiB of data: non-VM steps %.1f s (downloads excluded)\n", total-download)
		os.RemoveAll(o.OutputDir)
	}
}
