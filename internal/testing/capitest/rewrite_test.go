package capitest

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

const twoVersionCRD = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kubeadmconfigs.bootstrap.cluster.x-k8s.io
spec:
  group: bootstrap.cluster.x-k8s.io
  versions:
  - {name: v1beta1, served: true, storage: false}
  - {name: v1beta2, served: true, storage: true}
  - {name: v1alpha4, served: false, storage: false}
`

const oneVersionCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: images.openstack.k-orc.cloud
  labels: {keep: me}
spec:
  group: openstack.k-orc.cloud
  versions:
  - {name: v1alpha1, served: true, storage: true}
`

// A CRD serving two versions gets the contract labels and a conversion webhook at the
// manager's URL trusting the CA; one serving a single version only the labels.
func TestPrepareCRDs(t *testing.T) {
	dir := t.TempDir()
	two, one := filepath.Join(dir, "two.yaml"), filepath.Join(dir, "one.yaml")
	os.WriteFile(two, []byte(twoVersionCRD), 0o600)
	os.WriteFile(one, []byte(oneVersionCRD), 0o600)
	docs, err := prepareCRDs([]string{two, one}, contract("v1beta1", "v1beta2"), 9443, []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d CRDs, want 2", len(docs))
	}
	b, _ := yaml.Marshal(docs[0])
	var got struct {
		Metadata struct{ Labels map[string]string }
		Spec     struct {
			Conversion struct {
				Strategy string
				Webhook  struct {
					ClientConfig struct{ URL, CABundle string }
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Labels["cluster.x-k8s.io/v1beta1"] != "v1beta1" || got.Metadata.Labels["cluster.x-k8s.io/v1beta2"] != "v1beta2" {
		t.Errorf("labels %v, want both contract labels", got.Metadata.Labels)
	}
	cc := got.Spec.Conversion.Webhook.ClientConfig
	if got.Spec.Conversion.Strategy != "Webhook" || cc.URL != "https://127.0.0.1:9443/convert" || cc.CABundle != base64.StdEncoding.EncodeToString([]byte("CA")) {
		t.Errorf("conversion %+v, want the webhook at https://127.0.0.1:9443/convert with the CA", got.Spec.Conversion)
	}
	spec := docs[1]["spec"].(map[string]any)
	if _, ok := spec["conversion"]; ok {
		t.Error("a CRD serving one version got a conversion webhook")
	}
	if l := docs[1]["metadata"].(map[string]any)["labels"].(map[string]any); l["keep"] != "me" || l["cluster.x-k8s.io/v1beta2"] != "v1beta2" {
		t.Errorf("labels %v, want the CRD's own and the contract labels", l)
	}
	if _, err := prepareCRDs([]string{filepath.Join(dir, "missing.yaml")}, nil, 1, nil); err == nil {
		t.Error("a missing CRD file gave no error")
	}
}

const webhookManifest = `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-cluster-x-k8s-io-v1beta2-machinedeployment}
  name: default.machinedeployment.cluster.x-k8s.io
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-cluster-x-k8s-io-v1beta2-cluster}
  name: validation.cluster.cluster.x-k8s.io
`

// Each webhook's service becomes the URL of the process on 127.0.0.1 with the CA, and the
// configurations' names get the provider's prefix (the providers reuse them).
func TestRewriteWebhooks(t *testing.T) {
	docs, err := rewriteWebhooks([]byte(webhookManifest), "kcp", 9444, []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, url string }{
		{"kcp-mutating-webhook-configuration", "https://127.0.0.1:9444/mutate-cluster-x-k8s-io-v1beta2-machinedeployment"},
		{"kcp-validating-webhook-configuration", "https://127.0.0.1:9444/validate-cluster-x-k8s-io-v1beta2-cluster"},
	}
	if len(docs) != len(want) {
		t.Fatalf("%d configurations, want %d", len(docs), len(want))
	}
	for i, w := range want {
		if n := docs[i]["metadata"].(map[string]any)["name"]; n != w.name {
			t.Errorf("name %v, want %s", n, w.name)
		}
		cc := docs[i]["webhooks"].([]any)[0].(map[string]any)["clientConfig"].(map[string]any)
		if cc["url"] != w.url || cc["caBundle"] != base64.StdEncoding.EncodeToString([]byte("CA")) || cc["service"] != nil {
			t.Errorf("clientConfig %v, want url %s with the CA and no service", cc, w.url)
		}
	}
	if _, err := rewriteWebhooks([]byte("apiVersion: v1\nkind: X\nmetadata: {name: x}\nwebhooks: [{name: w, clientConfig: {url: https://x}}]\n"), "p", 1, nil); err == nil {
		t.Error("a webhook without a service path gave no error")
	}
}
