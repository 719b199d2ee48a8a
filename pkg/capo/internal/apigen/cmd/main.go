// Command apigen writes pkg/capo's mirror of the upstream API types: go generate ./pkg/capo
// (make generate). Rerun it after bumping CAPI, CAPO, ORC or k8s.io/api in go.mod.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo/internal/apigen"
)

func main() {
	out := flag.String("o", "internal/apimirror/zz_generated.go", "the file to write")
	flag.Parse()
	src, err := apigen.Generate()
	if err == nil {
		tmp := filepath.Join(filepath.Dir(*out), "."+filepath.Base(*out)+".tmp")
		if err = os.WriteFile(tmp, src, 0o644); err == nil {
			err = os.Rename(tmp, *out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
