package capitest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// What kustomize, cert-manager and a Service would do to a provider's manifests, done for
// processes on 127.0.0.1 (controller-runtime's envtest does the same rewrites).

// docSep splits a multi-document YAML stream.
var docSep = regexp.MustCompile(`(?m)^---[ \t]*$\n?`)

// splitDocs decodes each non-empty document of a YAML stream.
func splitDocs(b []byte) ([]map[string]any, error) {
	var out []map[string]any
	for _, d := range docSep.Split(string(b), -1) {
		if strings.TrimSpace(d) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// joinDocs encodes docs as one YAML stream.
func joinDocs(docs []map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// prepareCRDs is each CRD of files with labels added (the CAPI contract labels a provider's
// kustomization adds, e.g. cluster.x-k8s.io/v1beta2: v1beta2) and, when it serves more than one
// version and port is not 0, a conversion webhook at https://127.0.0.1:port/convert trusting caPEM.
func prepareCRDs(files []string, labels map[string]string, port int, caPEM []byte) ([]map[string]any, error) {
	var out []map[string]any
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		docs, err := splitDocs(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, d := range docs {
			meta, _ := d["metadata"].(map[string]any)
			spec, _ := d["spec"].(map[string]any)
			if d["kind"] != "CustomResourceDefinition" || meta == nil || spec == nil {
				return nil, fmt.Errorf("%s: a document that is not a CustomResourceDefinition", f)
			}
			if len(labels) > 0 {
				l, _ := meta["labels"].(map[string]any)
				if l == nil {
					l = map[string]any{}
				}
				for k, v := range labels {
					l[k] = v
				}
				meta["labels"] = l
			}
			served := 0
			versions, _ := spec["versions"].([]any)
			for _, v := range versions {
				if vm, _ := v.(map[string]any); vm["served"] == true {
					served++
				}
			}
			if served > 1 && port != 0 { // port 0: no manager serves it (stored version only)
				spec["conversion"] = map[string]any{"strategy": "Webhook", "webhook": map[string]any{
					"conversionReviewVersions": []any{"v1", "v1beta1"},
					"clientConfig": map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d/convert", port),
						"caBundle": base64.StdEncoding.EncodeToString(caPEM)}}}
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// rewriteWebhooks is a provider's kubebuilder webhook configurations (config/webhook/manifests.yaml)
// served by a process on 127.0.0.1:port: each webhook's service becomes the URL
// https://127.0.0.1:port<path> trusting caPEM, and each configuration's name gets prefix- (the
// providers reuse names, e.g. validating-webhook-configuration).
func rewriteWebhooks(manifest []byte, prefix string, port int, caPEM []byte) ([]map[string]any, error) {
	docs, err := splitDocs(manifest)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		meta, _ := d["metadata"].(map[string]any)
		if meta == nil {
			return nil, fmt.Errorf("a webhook configuration without metadata")
		}
		meta["name"] = prefix + "-" + fmt.Sprint(meta["name"])
		hooks, _ := d["webhooks"].([]any)
		for _, h := range hooks {
			hm, _ := h.(map[string]any)
			cc, _ := hm["clientConfig"].(map[string]any)
			svc, _ := cc["service"].(map[string]any)
			path, ok := svc["path"].(string)
			if !ok {
				return nil, fmt.Errorf("webhook %v: no clientConfig.service.path", hm["name"])
			}
			hm["clientConfig"] = map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d%s", port, path),
				"caBundle": base64.StdEncoding.EncodeToString(caPEM)}
		}
	}
	return docs, nil
}
