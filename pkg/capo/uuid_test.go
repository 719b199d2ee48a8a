package capo_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// CAPO's CRDs take the external network and the image by UUID only (format: uuid): the API
// server refused a manifest with a network name. manifests refuses a name (exit 2, naming the
// command that gives the ID) and keeps a UUID or a ${VAR} left for clusterctl.
func TestManifestsRefusesANameForAUUID(t *testing.T) {
	const id = "3f8b1b8e-5c1a-4b8e-9d0c-2a6f4e1d7c90"
	for _, tc := range []struct {
		name string
		o    capo.ManifestsOptions
		want []string // empty: accepted
	}{
		{"network name", capo.ManifestsOptions{Sets: []string{"OPENSTACK_EXTERNAL_NETWORK_ID=public"}},
			[]string{"OPENSTACK_EXTERNAL_NETWORK_ID", `"public"`, "not a UUID", "openstack network show -f value -c id"}},
		{"network name, clusterclass", capo.ManifestsOptions{ClusterClass: true, Sets: []string{"OPENSTACK_EXTERNAL_NETWORK_ID=ext-net"}},
			[]string{"OPENSTACK_EXTERNAL_NETWORK_ID", "not a UUID"}},
		{"image name as ID", capo.ManifestsOptions{Image: capo.ImageFlags{Ref: capo.ImageRefID, ID: "flatcar-stable"}},
			[]string{"--image-id", `"flatcar-stable"`, "openstack image show -f value -c id"}},
		{"network UUID", capo.ManifestsOptions{Sets: []string{"OPENSTACK_EXTERNAL_NETWORK_ID=" + strings.ToUpper(id)}}, nil},
		{"image UUID", capo.ManifestsOptions{Image: capo.ImageFlags{Ref: capo.ImageRefORC, ID: id}}, nil},
		{"left to clusterctl", capo.ManifestsOptions{Sets: []string{"OPENSTACK_EXTERNAL_NETWORK_ID=${EXT_NET}"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := capo.Manifests(context.Background(), tc.o)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("err %v, want an invalid-input error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// The ClusterClass's externalNetworkID variable is a UUID too, so a topology Cluster (or a later
// edit of its variables) with a network name is refused at admission by CAPI's webhook, rather
// than admitted and failing when the topology controller creates the OpenStackCluster.
func TestClusterClassExternalNetworkIsAUUID(t *testing.T) {
	r, err := capo.Manifests(context.Background(), capo.ManifestsOptions{ClusterClass: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(r.Manifest), "\n---\n") {
		var cc struct {
			Kind string
			Spec struct {
				Variables []struct {
					Name   string
					Schema struct {
						OpenAPIV3Schema struct{ Type, Format string }
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &cc); err != nil || cc.Kind != "ClusterClass" {
			continue
		}
		for _, v := range cc.Spec.Variables {
			if v.Name == "externalNetworkID" {
				if s := v.Schema.OpenAPIV3Schema; s.Type != "string" || s.Format != "uuid" {
					t.Errorf("externalNetworkID's schema is %+v, want a string of format uuid (CAPO's externalNetwork.id)", s)
				}
				return
			}
		}
	}
	t.Fatal("no ClusterClass with an externalNetworkID variable")
}
