// Package templates embeds the clusterctl cluster templates for Flatcar nodes on CAPO. go:embed
// cannot reach parent directories, so the files are embedded here, next to themselves.
package templates

import "embed"

// FS holds the base template of each CAPI API version (cluster-template-flatcar*.yaml) and the
// additionalConfig of each flavor (clc/*.yaml); pkg/capo makes the flavors' templates from them.
//
//go:embed *.yaml clc/*.yaml
var FS embed.FS
