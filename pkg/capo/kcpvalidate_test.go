package capo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	bootstrapadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/yaml"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
)

// The control plane's KubeadmConfigSpec of every v1beta2 output passes the rule KCP's admission
// webhook applies, CAPI's own Validate(spec, isKCP=true) (a method on the API type before v1.14, the webhook package's since): the
// real webhook refused the v1beta2 templates once, because initConfiguration.timeouts set
// controlPlaneComponentHealthCheckSeconds (1200) and joinConfiguration.timeouts left it unset.
// The gate on, as clusterctl's EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION=true sets it on KCP.
func TestKubeadmControlPlaneSpecPassesCAPIValidation(t *testing.T) {
	// Restored as it was: lint (capo.ValidateCAPI) turns the gate on once per process.
	was := feature.Gates.Enabled(feature.KubeadmBootstrapFormatIgnition)
	if err := feature.MutableGates.Set(string(feature.KubeadmBootstrapFormatIgnition) + "=true"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { feature.MutableGates.Set(fmt.Sprintf("%s=%t", feature.KubeadmBootstrapFormatIgnition, was)) })
	for _, tc := range []struct {
		name string
		o    capo.ManifestsOptions
		kind string
		path string // where the KubeadmConfigSpec sits
	}{
		{"cluster", capo.ManifestsOptions{}, "KubeadmControlPlane", "spec.kubeadmConfigSpec"},
		{"without-lb", capo.ManifestsOptions{WithoutAPILoadBalancer: true}, "KubeadmControlPlane", "spec.kubeadmConfigSpec"},
		{"clusterclass", capo.ManifestsOptions{ClusterClass: true}, "KubeadmControlPlaneTemplate", "spec.template.spec.kubeadmConfigSpec"},
	} {
		for _, flavor := range []string{capo.FlavorBaked, capo.FlavorSysextBaked} {
			t.Run(tc.name+"/"+flavor, func(t *testing.T) {
				o := tc.o
				o.Flavor, o.FlavorGiven = flavor, true
				r, err := capo.Manifests(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				found := 0
				for _, doc := range strings.Split(string(r.Manifest), "\n---\n") {
					var obj map[string]any
					if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj["kind"] != tc.kind {
						continue
					}
					found++
					spec := obj
					for _, k := range strings.Split(tc.path, ".") {
						spec, _ = spec[k].(map[string]any)
					}
					b, err := yaml.Marshal(spec)
					if err != nil {
						t.Fatal(err)
					}
					var s bootstrapv1.KubeadmConfigSpec
					if err := yaml.Unmarshal(b, &s); err != nil {
						t.Fatalf("%s: %v", tc.path, err)
					}
					if errs := bootstrapadmission.Validate(&s, true, field.NewPath(tc.path)); len(errs) > 0 {
						t.Errorf("KCP's webhook would refuse the %s: %v", tc.kind, errs.ToAggregate())
					}
				}
				if found != 1 {
					t.Fatalf("%d %s documents, want 1", found, tc.kind)
				}
			})
		}
	}
}
