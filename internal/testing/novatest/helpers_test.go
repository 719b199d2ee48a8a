package novatest_test

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// mib renders per-process memory largest first.
func mib(m map[string]int64) string {
	type kv struct {
		k string
		v int64
	}
	var l []kv
	for k, v := range m {
		l = append(l, kv{k, v})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v })
	var b strings.Builder
	for _, e := range l {
		fmt.Fprintf(&b, "%s %d, ", e.k, e.v>>20)
	}
	return strings.TrimSuffix(b.String(), ", ") + " (MiB)"
}
