package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// FLATCAR_CAPO_CLOUD=a,b and FLATCAR_CAPO_TAG=a,b are two values each; FLATCAR_CAPO_PROPERTY and
// FLATCAR_CAPO_SET are one value, commas included. The flag help says which.
func TestRepeatableFlagsFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.raw")
	writeRaw(t, img, 1<<20)
	noClouds := "OS_CLIENT_CONFIG_FILE=" + filepath.Join(dir, "clouds.yaml")
	writeFile(t, filepath.Join(dir, "clouds.yaml"), "clouds:\n  other:\n    auth: {auth_url: http://127.0.0.1:1/v3}\n")
	upload := func(env ...string) testutil.Result {
		return testutil.RunCmd(t, testutil.Cmd{Args: []string{"upload", img, "--name", "x"}, Env: append(env, noClouds)})
	}

	// Two clouds: each is looked up (and reported) on its own.
	r := upload("FLATCAR_CAPO_CLOUD=east, west").MustFail(t, 2, `cloud "east" is not defined`, `cloud "west" is not defined`)
	if strings.Contains(r.Stderr, `"east, west"`) || strings.Contains(r.Stderr, `"east,west"`) {
		t.Fatalf("the list was taken as one cloud name:\n%s", r.Stderr)
	}
	// Two tags: the second is checked on its own.
	r = upload("FLATCAR_CAPO_TAG=good,a/b", "FLATCAR_CAPO_CLOUD=east").MustFail(t, 2, `"a/b"`)
	if strings.Contains(r.Stderr, "good,a/b") {
		t.Fatalf("the tag list was taken as one tag:\n%s", r.Stderr)
	}
	// One property, whose value has a comma: accepted as it is (the upload then fails on the cloud).
	r = upload("FLATCAR_CAPO_PROPERTY=note=a,b", "FLATCAR_CAPO_CLOUD=east").MustFail(t, 2, `cloud "east" is not defined`)
	if strings.Contains(r.Stderr, "--property") {
		t.Fatalf("a property value with a comma was split:\n%s", r.Stderr)
	}
	upload("FLATCAR_CAPO_PROPERTY=bad key=a,b").MustFail(t, 2, `invalid --property "bad key=a,b"`)

	// --set: one VAR=value, commas kept.
	r = testutil.RunCmd(t, testutil.Cmd{Args: []string{"manifests", "--cluster-name", "demo", "--image-name", "img"},
		Env: []string{"FLATCAR_CAPO_SET=OPENSTACK_SSH_KEY_NAME=key,with,commas"}}).MustSucceed(t)
	if !strings.Contains(r.Stdout, "sshKeyName: key,with,commas") {
		t.Fatalf("FLATCAR_CAPO_SET with commas was not one value:\n%s", r.Stdout)
	}

	// The help of each repeatable flag says how its variable is read.
	help := testutil.Run(t, "upload", "--help").MustSucceed(t).Stdout
	for _, want := range []string{"$FLATCAR_CAPO_CLOUD takes a comma-separated list", "$FLATCAR_CAPO_TAG takes a comma-separated list",
		"$FLATCAR_CAPO_PROPERTY is one value, commas included"} {
		if !strings.Contains(help, want) {
			t.Errorf("upload --help lacks %q", want)
		}
	}
	help = testutil.Run(t, "manifests", "--help").MustSucceed(t).Stdout
	if !strings.Contains(help, "$FLATCAR_CAPO_SET is one value, commas included") {
		t.Error("manifests --help does not say how FLATCAR_CAPO_SET is read")
	}
}

// FLATCAR_CAPO_INSECURE_SKIP_VERIFY=true turns verification off as the flag does, and says so
// as loudly, naming the variable so the user can find where it comes from.
func TestInsecureFromEnvironmentWarns(t *testing.T) {
	dir := t.TempDir()
	r := testutil.RunCmd(t, testutil.Cmd{
		Args: []string{"fetch", "--release-server", "http://127.0.0.1:1/{channel}", "--output-file", filepath.Join(dir, "x.img"), "--retries", "0"},
		Env:  []string{"FLATCAR_CAPO_INSECURE_SKIP_VERIFY=true"}})
	r.MustFail(t, 1, "WARNING: --insecure-skip-verify is ON", "FLATCAR_CAPO_INSECURE_SKIP_VERIFY=true", "NOT verified")
	// Without the variable, no such warning.
	r = testutil.RunCmd(t, testutil.Cmd{
		Args: []string{"fetch", "--release-server", "http://127.0.0.1:1/{channel}", "--output-file", filepath.Join(dir, "x.img"), "--retries", "0"},
		Env:  []string{"FLATCAR_CAPO_INSECURE_SKIP_VERIFY="}})
	if strings.Contains(r.Stderr, "WARNING") {
		t.Fatalf("warning without the variable:\n%s", r.Stderr)
	}
}
