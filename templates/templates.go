// Package templates embeds the clusterctl cluster templates for Flatcar nodes on CAPO. go:embed
// cannot reach parent directories, so the files are embedded here, next to themselves.
package templates

import "embed"

// FS holds cluster-template-flatcar*.yaml.
//
//go:embed *.yaml
var FS embed.FS
