package inspect

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// shape is the documented `inspect -o json` document (docs/inspect-json.md): a JSON kind per
// field; objects and list elements nest.
type shape map[string]any

const (
	str     = "string"
	num     = "number"
	boolean = "bool"
	boolNil = "bool|null"
	strMap  = "object of strings" // free keys, e.g. an extension-release
)

// list is a list whose elements have the given shape (or kind).
type list struct{ elem any }

var settingsShape = shape{"oem_id": str, "linux_append": str, "linux_console": str}

var reportShape = shape{
	"image": str, "format": str, "size": num,
	"partitions": list{shape{"number": num, "name": str, "typeGuid": str, "uuid": str, "start": num, "size": num, "type": str}},
	"mbr":        shape{"kind": str, "types": list{str}},
	"oem":        shape{"partition": num, "filesystem": str, "grubCfg": boolean, "settings": settingsShape, "oemReleaseId": str},
	"sysext":     list{shape{"name": str, "size": num}},
	"markers":    list{str},
	"firstBoot":  boolNil, "configIgn": boolean, "target": str, "verdict": str,
	"findings": list{shape{"level": str, "code": str, "message": str}},
	"extensions": shape{"root": str,
		"host": shape{"id": str, "versionId": str, "sysextLevel": str, "architecture": str, "source": str},
		"links": list{shape{"path": str, "name": str, "kind": str, "target": str, "resolved": str, "size": num,
			"checked": boolean, "extensionRelease": strMap, "wouldMerge": boolean, "reason": str}},
		"stored":     list{shape{"path": str, "size": num, "linked": boolean}},
		"containerd": str},
	"containerd": shape{"images": list{shape{"name": str, "digest": str, "platform": str, "size": num, "inArchive": boolean}},
		"archive": str, "archiveBytes": num, "importUnit": boolean, "kubernetesVersion": str, "kubeadm": list{str}, "missing": list{str},
		"dropIns": list{str}, "sandboxImage": str, "configPath": str,
		"registries": list{shape{"registry": str, "server": str, "mirrors": list{str}, "ca": boolean, "overridePath": boolean}},
		"proxy":      shape{"httpProxy": str, "httpsProxy": str, "noProxy": str, "hasPassword": boolean}, "authHosts": list{str}},
	"node": shape{"usbStorageOff": boolean, "usbStorageFile": str, "enabledSysext": list{str}, "releaseFileServer": str},
}

// checkShape reports every documented field that is missing, null where a list or value is
// due, or of the wrong kind, and every field the document does not describe.
func checkShape(t *testing.T, where string, v any, want any) {
	t.Helper()
	switch w := want.(type) {
	case shape:
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: %v is not an object", where, v)
			return
		}
		for k, sub := range w {
			got, present := obj[k]
			if !present {
				t.Errorf("%s.%s: missing", where, k)
				continue
			}
			checkShape(t, where+"."+k, got, sub)
		}
		for k := range obj {
			if _, ok := w[k]; !ok {
				t.Errorf("%s.%s: not in docs/inspect-json.md", where, k)
			}
		}
	case list:
		arr, ok := v.([]any)
		if !ok {
			t.Errorf("%s: %v is not a list (an empty list must be [], not null)", where, v)
			return
		}
		for i, e := range arr {
			checkShape(t, where+"[]", e, w.elem)
			_ = i
		}
	case string:
		ok := false
		switch w {
		case str:
			_, ok = v.(string)
		case num:
			_, ok = v.(float64)
		case boolean:
			_, ok = v.(bool)
		case boolNil:
			_, isBool := v.(bool)
			ok = isBool || v == nil
		case strMap:
			m, isMap := v.(map[string]any)
			ok = isMap
			for _, e := range m {
				if _, isStr := e.(string); !isStr {
					ok = false
				}
			}
		}
		if !ok {
			t.Errorf("%s: %#v is not a %s", where, v, w)
		}
	}
}

// The field table of docs/inspect-json.md names exactly the fields of reportShape.
func TestDocumentedFields(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "docs", "inspect-json.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	section = section[strings.Index(section, "## `flatcar-capo inspect"):]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-zA-Z.]+)(?:\\[\\])?` \\|").FindAllStringSubmatch(section, -1) {
		documented = append(documented, strings.Split(m[1], ".")[0])
	}
	var want []string
	for k := range reportShape {
		want = append(want, k)
	}
	documented = unique(documented)
	sort.Strings(want)
	if strings.Join(documented, " ") != strings.Join(want, " ") {
		t.Fatalf("docs/inspect-json.md documents %v, the test's shape has %v", documented, want)
	}
	for _, code := range []string{"oem-id-missing", "oem-id-mismatch", "config-ign-leftover", "oem-sysext-missing",
		"first-boot-missing", "autologin", "hybrid-mbr", "oem-release-differs", "sysext-differs",
		"sysext-link-dangling", "sysext-name-mismatch", "sysext-incompatible", "images-missing"} {
		if !strings.Contains(section, "`"+code+"`") {
			t.Errorf("finding code %s is not documented", code)
		}
	}
}

func unique(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// An empty report (nothing found yet) already has the full shape with [] lists.
func TestEmptyReportShape(t *testing.T) {
	r := newReport("x.img")
	r.judge()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	json.Unmarshal(b, &v)
	checkShape(t, "report", v, reportShape)
}

// The real command on real images: a READY and a NOT READY report decode to the documented
// shape, and the NOT READY one names the missing OEM sysext and the fix.
func TestInspectJSONShape(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs")
	ready := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	testutil.Run(t, "oem", "set", ready, "--id", "openstack").MustSucceed(t)
	broken := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, GrubCfg: "set oem_id=\"openstack\"\n",
		ExtraOEMFiles: map[string][]byte{"oem-release": []byte("ID=openstack\nVERSION_ID=4459.2.0\n")}})
	cases := []struct {
		img, verdict string
		code         int
	}{{ready, Ready, 0}, {broken, NotReady, 1}}
	for _, c := range cases {
		r := testutil.Run(t, "inspect", c.img, "--for", "openstack", "-o", "json")
		if r.Code != c.code {
			t.Fatalf("%s: exit %d, want %d\n%s", c.verdict, r.Code, c.code, r.Combined())
		}
		var v any
		if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil {
			t.Fatalf("%s: %v\n%s", c.verdict, err, r.Stdout)
		}
		checkShape(t, c.verdict, v, reportShape)
		var rep Report
		json.Unmarshal([]byte(r.Stdout), &rep)
		if rep.Verdict != c.verdict {
			t.Fatalf("verdict %s, want %s: %+v", rep.Verdict, c.verdict, rep.Findings)
		}
	}
	testutil.Run(t, "inspect", broken, "--for", "openstack").MustFail(t, 1, "NOT READY",
		"/oem/oem-release says ID=openstack", "/oem/sysext/oem-openstack-<version>.raw is missing", "without internet", "oem set")
}
