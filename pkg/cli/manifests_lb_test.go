package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
)

// --api-server-load-balancer=false renders what CAPO's without-lb template does: no
// apiServerLoadBalancer (CAPO puts the API server's floating IP on the control plane machine)
// and one control plane machine; the result decodes strictly and lints clean.
func TestManifestsWithoutAPILoadBalancer(t *testing.T) {
	with := testutil.Run(t, "manifests", "--image-name", "img").MustSucceed(t).Stdout
	if !strings.Contains(with, "  apiServerLoadBalancer:\n    enabled: true\n") || !strings.Contains(with, "replicas: ${CONTROL_PLANE_MACHINE_COUNT}") {
		t.Fatalf("the default has no API load balancer:\n%s", with)
	}
	for _, api := range []string{capo.CAPIv1beta2, capo.CAPIv1beta1} {
		r := testutil.Run(t, "manifests", "--capi-api", api, "--image-name", "img", "--api-server-load-balancer=false", "-o", "json").MustSucceed(t)
		var rep struct {
			Manifest  string   `json:"manifest"`
			Variables []string `json:"variables"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatal(err)
		}
		m := rep.Manifest
		if strings.Contains(m, "apiServerLoadBalancer") || strings.Contains(m, "disableAPIServerFloatingIP") ||
			!strings.Contains(m, "kind: KubeadmControlPlane\nmetadata:\n  name: ${CLUSTER_NAME}-control-plane\nspec:\n  replicas: 1\n") {
			t.Errorf("%s without LB:\n%s", api, m)
		}
		for _, v := range rep.Variables {
			if v == "CONTROL_PLANE_MACHINE_COUNT" {
				t.Errorf("%s without LB still asks for CONTROL_PLANE_MACHINE_COUNT", api)
			}
		}
		lint := testutil.RunCmd(t, testutil.Cmd{Args: []string{"lint", "-"}, Stdin: m}).MustSucceed(t)
		if !strings.Contains(lint.Stdout, "0 error(s), 0 warning(s)") {
			t.Errorf("lint:\n%s", lint.Stdout)
		}
	}
	env := testutil.RunCmd(t, testutil.Cmd{Args: []string{"manifests", "--image-name", "img"},
		Env: []string{"FLATCAR_CAPO_API_SERVER_LOAD_BALANCER=false"}}).MustSucceed(t).Stdout
	if strings.Contains(env, "apiServerLoadBalancer") {
		t.Error("FLATCAR_CAPO_API_SERVER_LOAD_BALANCER=false kept the load balancer")
	}
	testutil.Run(t, "manifests", "--api-server-load-balancer=false", "--set", "CONTROL_PLANE_MACHINE_COUNT=3").
		MustFail(t, 2, "CONTROL_PLANE_MACHINE_COUNT", "one machine", "without-lb")
	testutil.Run(t, "manifests", "--api-server-load-balancer=maybe").MustFail(t, 2, "api-server-load-balancer")
}
