package capo

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// DecodeUpstream is DecodeStrict: documents decode into the upstream types themselves.
var DecodeUpstream = decodeStrict

// template is the embedded baked-flavor cluster template for a CAPI API version, unrendered.
func template(capiAPI string) ([]byte, error) {
	return flavorTemplate(FlavorBaked, capiAPI, false, nil)
}

// FlavorTemplate is the cluster template of a flavor for a CAPI API version, unrendered.
func FlavorTemplate(flavor, capiAPI string) ([]byte, error) {
	return flavorTemplate(flavor, capiAPI, false, nil)
}

// imageSnippet returns the OpenStackMachineTemplate documents (control plane and workers)
// that select imageName. Other variables are left for clusterctl.
func imageSnippet(imageName, capiAPI string) ([]byte, error) {
	r, err := renderChecked(renderOptions{CAPIAPI: capiAPI, Values: map[string]string{VarImageName: imageName}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "# Flatcar image for CAPO; the full template: flatcar-capo manifests --image-name %q\n", imageName)
	for _, doc := range bytes.Split(r.Manifest, []byte("\n---\n")) {
		if bytes.Contains(doc, []byte("\nkind: OpenStackMachineTemplate\n")) {
			out.WriteString("---\n")
			out.Write(stripComments(doc))
		}
	}
	return out.Bytes(), nil
}

func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(string(doc), "\n") {
		if !strings.HasPrefix(line, "#") && line != "" {
			out.WriteString(line)
		}
	}
	if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// contains reports whether the sorted list holds s.
func contains(list []string, s string) bool {
	_, ok := slices.BinarySearch(list, s)
	return ok
}
