package capo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubeadmv1beta2 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kcpv1beta2 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta2 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	bootstrapadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	kcpadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	"sigs.k8s.io/cluster-api/feature"
)

// A CAPI validation failure: the field path and message of one cause of the webhook's refusal.
type webhookCause struct {
	Field   string
	Message string
}

// capiWebhooks run CAPI's own admission webhooks (defaulting, then create validation) on a
// decoded v1beta2 document, without a cluster: the kinds whose webhooks need no client. v1beta1
// documents reach the same webhooks through CAPI's conversion on a cluster; lint checks their
// fields only.
var capiWebhooks = map[string]func(ctx context.Context, obj any) error{
	"bootstrap.cluster.x-k8s.io/v1beta2/KubeadmConfig": func(ctx context.Context, obj any) error {
		_, err := (&bootstrapadmission.KubeadmConfig{}).ValidateCreate(ctx, obj.(*kubeadmv1beta2.KubeadmConfig))
		return err
	},
	// The template's defaulting applies only to the topology controller's dry-run requests.
	"bootstrap.cluster.x-k8s.io/v1beta2/KubeadmConfigTemplate": func(ctx context.Context, obj any) error {
		_, err := (&bootstrapadmission.KubeadmConfigTemplate{}).ValidateCreate(ctx, obj.(*kubeadmv1beta2.KubeadmConfigTemplate))
		return err
	},
	"controlplane.cluster.x-k8s.io/v1beta2/KubeadmControlPlane": func(ctx context.Context, obj any) error {
		w, kcp := &kcpadmission.KubeadmControlPlane{}, obj.(*kcpv1beta2.KubeadmControlPlane)
		if err := w.Default(ctx, kcp); err != nil {
			return err
		}
		_, err := w.ValidateCreate(ctx, kcp)
		return err
	},
	"controlplane.cluster.x-k8s.io/v1beta2/KubeadmControlPlaneTemplate": func(ctx context.Context, obj any) error {
		_, err := (&kcpadmission.KubeadmControlPlaneTemplate{}).ValidateCreate(ctx, obj.(*kcpv1beta2.KubeadmControlPlaneTemplate))
		return err
	},
	// ClusterClass's create validation reads no other object (its update and delete checks do).
	"cluster.x-k8s.io/v1beta2/ClusterClass": func(ctx context.Context, obj any) error {
		_, err := (&coreadmission.ClusterClass{}).ValidateCreate(ctx, obj.(*clusterv1beta2.ClusterClass))
		return err
	},
}

// enableWebhookGates turns on the feature gates Flatcar's manifests need on the management
// cluster (EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION, CLUSTER_TOPOLOGY for ClusterClass), so the
// webhooks judge the documents as such a cluster does.
var enableWebhookGates = sync.OnceValue(func() error {
	return feature.MutableGates.SetFromMap(map[string]bool{
		string(feature.KubeadmBootstrapFormatIgnition): true,
		string(feature.ClusterTopology):                true,
	})
})

// validateCAPI runs CAPI's admission webhook of the document's kind on it, as the management
// cluster would on kubectl apply, and returns the causes of a refusal (nil when admitted or when
// CAPI has no cluster-free webhook for the kind). A clusterctl template's variables without a
// default are given sample values first. A document that does not decode into its upstream type
// is not validated: the field checks report it.
func validateCAPI(ctx context.Context, d *Document) ([]webhookCause, error) {
	hook := capiWebhooks[d.APIVersion+"/"+d.Kind]
	if hook == nil {
		return nil, nil
	}
	if err := enableWebhookGates(); err != nil {
		return nil, fmt.Errorf("enabling CAPI's feature gates: %w", err)
	}
	obj, err := webhookInput(d)
	if err != nil {
		return nil, nil
	}
	err = hook(ctx, obj)
	if err == nil {
		return nil, nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil && len(status.Status().Details.Causes) > 0 {
		var out []webhookCause
		for _, c := range status.Status().Details.Causes {
			out = append(out, webhookCause{Field: c.Field, Message: c.Message})
		}
		return out, nil
	}
	return []webhookCause{{Message: err.Error()}}, nil
}

// webhookInput decodes the document into its upstream type as the API server does (unknown
// fields dropped), with a template's remaining ${VAR} references given sample values.
func webhookInput(d *Document) (any, error) {
	obj := d.obj
	if text, err := yaml.Marshal(d.node); err == nil && strings.Contains(string(text), "${") {
		var filled map[string]any
		if err := yaml.Unmarshal([]byte(withSampleValues(string(text))), &filled); err == nil {
			obj = filled
		}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	v := newOf(typeOf(d))
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, err
	}
	return v, nil
}

// parseFieldPath turns a field.Path string ("spec.files[0].path", "metadata.labels[a.b/c]")
// into a Path.
func parseFieldPath(s string) Path {
	var p Path
	var name strings.Builder
	flush := func() {
		if name.Len() > 0 {
			p = append(p, name.String())
			name.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.':
			flush()
		case '[':
			flush()
			key, _, _ := strings.Cut(s[i+1:], "]")
			i += len(key) + 1
			if n, err := strconv.Atoi(key); err == nil {
				p = append(p, n)
			} else {
				p = append(p, key)
			}
		default:
			name.WriteByte(s[i])
		}
	}
	flush()
	return p
}
