package fleet

import (
	"bytes"
	"errors"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// protectSet is the image names and IDs that files in use mention: manifests (an
// OpenStackMachineTemplate's image filter name or id, an ORC Image's import), build records
// (imageName, the Glance IDs). Every string value of every document counts, so a field this
// code does not know still protects: a false match keeps an image, a miss would delete one.
type protectSet struct {
	where map[string]string // name or ID -> the file that names it
}

// loadProtect reads every file (YAML, multi-document, or JSON); a directory stands for the
// .yaml, .yml and .json files below it (a GitOps repository of cluster manifests).
func loadProtect(paths []string) (*protectSet, error) {
	p := &protectSet{where: map[string]string{}}
	var files []string
	for _, path := range paths {
		if err := infile.CheckPath("--protect", path, infile.Protect); err != nil {
			return nil, err
		}
		fi, err := os.Stat(path)
		if err != nil {
			return nil, errs.Invalidf("--protect: %w", err)
		}
		if !fi.IsDir() {
			files = append(files, path)
			continue
		}
		err = filepath.WalkDir(path, func(f string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch filepath.Ext(f) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					files = append(files, f)
				}
			}
			return nil
		})
		if err != nil {
			return nil, errs.Invalidf("--protect: %w", err)
		}
	}
	for _, f := range files {
		b, err := infile.ReadFile("--protect", f, infile.Protect)
		if err != nil {
			return nil, errs.Invalid(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		n := 0
		for {
			var doc yaml.Node
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, errs.Invalidf("--protect %s: not YAML or JSON: %w", f, err)
			}
			n++
			walkStrings(&doc, func(s string) {
				if _, ok := p.where[s]; !ok {
					p.where[s] = f
				}
			})
		}
		if n == 0 {
			return nil, errs.Invalidf("--protect %s: the file is empty", f)
		}
	}
	return p, nil
}

func walkStrings(n *yaml.Node, fn func(string)) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		fn(n.Value)
	}
	for _, c := range n.Content {
		walkStrings(c, fn)
	}
}

// Has says whether a file names the image (by name or by ID).
func (p *protectSet) Has(im Image) bool { return p != nil && p.Where(im) != "" }

// Where is the file that names the image, or "".
func (p *protectSet) Where(im Image) string {
	if p == nil {
		return ""
	}
	if f, ok := p.where[im.ID]; ok {
		return f
	}
	return p.where[im.Name]
}
