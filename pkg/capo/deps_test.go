package capo

import (
	"os/exec"
	"strings"
	"testing"
)

// The binary links none of the Kubernetes API packages (their package inits cost every command
// ~10 ms of start-up, issue 20 goal 5): pkg/capo decodes into generated mirror types instead.
func TestBinaryLinksNoKubernetesAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/flatcar-capo").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps gave only %d packages", len(deps))
	}
	forbidden := []string{"k8s.io/api/", "k8s.io/client-go/", "k8s.io/apimachinery/pkg/runtime",
		"k8s.io/apiextensions-apiserver/", "k8s.io/component-base/", "sigs.k8s.io/cluster-api",
		"sigs.k8s.io/controller-runtime", "github.com/k-orc/", "github.com/prometheus/"}
	for _, p := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(p, f) {
				t.Errorf("cmd/flatcar-capo links %s", p)
			}
		}
	}
}
