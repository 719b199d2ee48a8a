package capo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

// lintInput is one manifest file (or stdin) to lint.
type lintInput struct {
	Name string
	Data []byte
}

// ImageLookup counts the active Glance images that an image filter (name and/or tags)
// matches; it lets `lint --cloud` check what CAPO will find.
type ImageLookup func(ctx context.Context, name string, tags []string) (int, error)

// lintOptions tune the checks.
type lintOptions struct {
	// CAPIVersion is the CAPI release the manifests are applied to; NewestCAPIVersion if empty.
	CAPIVersion string
	// Images, when set, checks every OpenStackMachineTemplate's image filter against a cloud.
	Images ImageLookup
	// MinDiskGiB, when set, is the image's min_disk: root volumes below it are reported.
	MinDiskGiB int
	// ImageMinDisk, when set with Images, gives the min_disk of a filter's image in the cloud.
	ImageMinDisk ImageLookup
}

// Validate checks the options before any manifest is read; its errors wrap errs.ErrInvalid.
func (o lintOptions) Validate() error {
	if o.CAPIVersion == "" {
		return nil
	}
	v, err := parseCAPIVersion(o.CAPIVersion)
	if err == nil {
		err = v.checkSupported()
	}
	if err != nil {
		return errs.Invalidf("invalid --capi-version: %v", err)
	}
	return nil
}

// Finding is one problem, located by file, document, line and field path.
type Finding struct {
	Rule      string   `json:"rule"`
	Severity  Severity `json:"severity"`
	File      string   `json:"file"`
	Document  int      `json:"document"`
	Line      int      `json:"line"`
	Kind      string   `json:"kind,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name,omitempty"`
	Path      string   `json:"path,omitempty"`
	Message   string   `json:"message"`
	Fix       string   `json:"fix"`
}

// LintReport is the result of LintFiles.
type LintReport struct {
	CAPIVersion string    `json:"capiVersion"`
	Documents   int       `json:"documents"`
	Errors      int       `json:"errors"`
	Warnings    int       `json:"warnings"`
	Findings    []Finding `json:"findings"`
}

// lintInputs checks manifests for the Ignition and Flatcar pitfalls of CAPO clusters. Invalid
// options are returned as an error; problems in the manifests are findings.
func lintInputs(ctx context.Context, inputs []lintInput, opts lintOptions) (*LintReport, error) {
	opts.CAPIVersion = cmp.Or(opts.CAPIVersion, NewestCAPIVersion)
	capi, err := parseCAPIVersion(opts.CAPIVersion)
	if err == nil {
		err = capi.checkSupported()
	}
	if err != nil {
		return nil, err
	}
	l := &linter{capi: capi, clc: map[string]*CLCResult{}}
	docs, count, err := l.checkEach(inputs)
	if err != nil {
		return nil, err
	}
	l.findings = append(l.findings, l.checkFlatcarFormat(docs)...)
	l.findings = append(l.findings, l.checkFormatChanges(docs)...)
	l.findings = append(l.findings, l.checkImageRefs(docs)...)
	if opts.MinDiskGiB > 0 {
		l.findings = append(l.findings, checkRootVolumes(docs, opts.MinDiskGiB)...)
	}
	if opts.Images != nil {
		fs, err := l.checkImages(ctx, docs, opts.Images, opts.ImageMinDisk)
		if err != nil {
			return nil, err
		}
		l.findings = append(l.findings, fs...)
	}
	rep := &LintReport{CAPIVersion: capi.String(), Documents: count, Findings: l.findings}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.File != b.File {
			return inputIndex(inputs, a.File) < inputIndex(inputs, b.File)
		}
		return a.Line < b.Line
	})
	for _, f := range rep.Findings {
		if f.Severity == severityError {
			rep.Errors++
		} else {
			rep.Warnings++
		}
	}
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	return rep, nil
}

// What lint holds at once: one document of at most maxDocumentBytes while it is read (a
// Kubernetes object is at most etcd's 1.5 MiB), and, for the rules across documents, the
// CAPI/CAPO/ORC objects of all files, at most maxKeptNodes YAML nodes (some 4 MiB of YAML, the
// objects of hundreds of clusters). A parsed document takes ~150 times its bytes, so holding
// every document of a 20 MiB file took 3 GB.
const (
	maxDocumentBytes = 2 * infile.MiB
	maxKeptNodes     = 500_000
)

// checkEach reads the inputs a document at a time, runs the one-document rules on each as it
// comes (on every CPU), and keeps only what the rules across documents read (crossDocument).
func (l *linter) checkEach(inputs []lintInput) (kept []*Document, count int, err error) {
	type job struct {
		seq int
		d   *Document
	}
	type result struct {
		seq int
		fs  []Finding
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	next := make(chan job, runtime.GOMAXPROCS(0))
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Go(func() {
			for j := range next {
				if fs := l.checkDocument(j.d); len(fs) > 0 {
					mu.Lock()
					results = append(results, result{j.seq, fs})
					mu.Unlock()
				}
			}
		})
	}
	nodes := 0
	for _, in := range inputs {
		template := isClusterctlTemplate(in.Data) // else a manifest for kubectl: its ${...} are the node's shell's
		perr := eachDocument(in.Name, in.Data, template, maxDocumentBytes, func(d *Document) error {
			if crossDocument(d) {
				if nodes += countNodes(d.node); nodes > maxKeptNodes {
					return errs.Invalidf("%s: lint holds the CAPI, CAPO and ORC objects of all its files to check them against each other, "+
						"at most %d YAML nodes of them (%s has more by document %d): lint fewer clusters at a time", in.Name, maxKeptNodes, in.Name, d.Index)
				}
				kept = append(kept, d)
			}
			count++
			next <- job{count, d}
			return nil
		})
		if errors.Is(perr, errs.ErrInvalid) {
			err = perr
			break
		}
		if perr != nil {
			l.findings = append(l.findings, newFinding(&Document{File: in.Name, Line: yamlErrorLine(perr)}, ruleYAML, nil, perr.Error()))
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return nil, 0, err
	}
	sort.Slice(results, func(i, j int) bool { return results[i].seq < results[j].seq })
	for _, r := range results {
		l.findings = append(l.findings, r.fs...)
	}
	return kept, count, nil
}

// crossDocument says whether a rule across documents reads d: the CAPI, CAPO and ORC objects
// (machines and their owners, bootstrap configs, machine templates, ClusterClasses, ORC Images).
func crossDocument(d *Document) bool {
	g := d.Group()
	return strings.HasSuffix(g, "cluster.x-k8s.io") || g == "openstack.k-orc.cloud"
}

func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

func inputIndex(inputs []lintInput, name string) int {
	for i, in := range inputs {
		if in.Name == name {
			return i
		}
	}
	return len(inputs)
}

type linter struct {
	capi     capiVersion
	findings []Finding
	mu       sync.Mutex
	clc      map[string]*CLCResult // additionalConfig text -> translation, shared by documents
}

func newFinding(d *Document, rule string, path Path, msg string) Finding {
	r := ruleByID(rule)
	_, line := d.walk(path)
	return Finding{Rule: rule, Severity: r.Severity, File: d.File, Document: d.Index, Line: line,
		Kind: d.Kind, Namespace: d.Namespace, Name: d.Name, Path: path.String(), Message: msg, Fix: r.Fix}
}

// transpile caches translations: a 1,000-document file usually repeats one additionalConfig.
func (l *linter) transpile(src string) *CLCResult {
	l.mu.Lock()
	res, ok := l.clc[src]
	l.mu.Unlock()
	if ok {
		return res
	}
	r := TranspileCLC(src)
	l.mu.Lock()
	l.clc[src] = &r
	l.mu.Unlock()
	return &r
}

// checkDocument runs the rules that need one document only.
func (l *linter) checkDocument(d *Document) []Finding {
	var out []Finding
	for _, e := range d.refErrors {
		f := newFinding(d, ruleVariableSyntax, nil, e.err.Error())
		f.Line = e.line
		out = append(out, f)
	}
	if known, ok := uncheckedNewer(d); ok {
		knows := "no version of " + d.Kind
		if len(known) > 0 {
			knows = strings.Join(known, ", ")
		}
		out = append(out, newFinding(d, ruleUncheckedAPI, Path{"apiVersion"},
			fmt.Sprintf("%s %s is not checked: this flatcar-capo has no Go type for apiVersion %s (it knows %s)",
				d.APIVersion, d.Kind, d.APIVersion, knows)))
	}
	unknown := unknownFields(d)
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].String() < unknown[j].String() })
	for _, p := range unknown {
		out = append(out, newFinding(d, ruleUnknownField, p,
			fmt.Sprintf("%s %s has no field %q here", d.APIVersion, d.Kind, p[len(p)-1])))
	}
	out = append(out, checkCAPIValidation(d)...)
	b, ok := newBootstrapSpec(d)
	if ok && !l.capi.contentFormatKnown() {
		for i, f := range getList(b.spec, "files") {
			if _, ok := get(f, "contentFormat"); ok {
				out = append(out, newFinding(d, ruleUnknownField, b.path.Child("files", i, "contentFormat"),
					fmt.Sprintf("files[].contentFormat is new in CAPI 1.14: CAPI %s's API server refuses it (kubectl's strict field validation) or drops it, and the file is written untemplated", l.capi)))
			}
		}
	}
	if ok && b.ignition() {
		out = append(out, l.checkIgnitionSpec(b)...)
	}
	return out
}

// checkCAPIValidation reports what CAPI's admission webhook of the document's kind refuses, with
// the webhook's field path and message.
func checkCAPIValidation(d *Document) []Finding {
	causes, err := validateCAPI(context.Background(), d)
	if err != nil {
		return []Finding{newFinding(d, ruleCAPIValidation, nil, err.Error())}
	}
	var out []Finding
	for _, c := range causes {
		msg := fmt.Sprintf("CAPI's %s webhook refuses it: %s", d.Kind, c.Message)
		if c.Field != "" {
			msg = fmt.Sprintf("CAPI's %s webhook refuses it: %s: %s", d.Kind, c.Field, c.Message)
		}
		out = append(out, newFinding(d, ruleCAPIValidation, parseFieldPath(c.Field), msg))
	}
	return out
}

// yamlErrorLine extracts "line N" from a YAML parser error, 0 when there is none.
func yamlErrorLine(err error) int {
	n := 0
	if _, after, ok := strings.Cut(err.Error(), "line "); ok {
		fmt.Sscanf(after, "%d", &n)
	}
	return n
}

// WriteText prints a report for humans: one block per finding, then a summary line.
func (r *LintReport) WriteText(w io.Writer) error {
	for _, f := range r.Findings {
		id := f.Name
		if f.Namespace != "" {
			id = f.Namespace + "/" + f.Name
		}
		where := ""
		if f.Kind != "" {
			where = fmt.Sprintf(" %s %s (document %d)", f.Kind, id, f.Document)
		}
		if f.Path != "" {
			where += " " + f.Path
		}
		fmt.Fprintf(w, "%s:%d: %s [%s]%s\n  %s\n  fix: %s\n", f.File, f.Line, f.Severity, f.Rule, where,
			indent(f.Message, "  "), indent(f.Fix, "    "))
	}
	_, err := fmt.Fprintf(w, "%d document(s) checked for CAPI %s: %d error(s), %d warning(s)\n",
		r.Documents, r.CAPIVersion, r.Errors, r.Warnings)
	return err
}

func indent(s, prefix string) string { return strings.ReplaceAll(s, "\n", "\n"+prefix) }
