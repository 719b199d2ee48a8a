package apimirror

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/inf.v0"
)

// The mirrors of the upstream types that decode JSON themselves (apigen.Leaves). Each UnmarshalJSON
// is the upstream one (apimachinery and apiextensions-apiserver v0.35.3, cluster-api v1.13.0)
// minus what decoding keeps: it accepts, rejects and words its errors as upstream does, which
// TestMirrorDecodesAsUpstream checks against the upstream types.

// Metav1_Time is metav1.Time: null or an RFC 3339 string. Embedding time.Time keeps upstream's
// method set (UnmarshalText included).
type Metav1_Time struct{ time.Time }

func (t *Metav1_Time) UnmarshalJSON(b []byte) error {
	if len(b) == 4 && string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	pt, err := time.Parse(time.RFC3339, str)
	if err != nil {
		return err
	}
	t.Time = pt.Local()
	return nil
}

// Metav1_Duration is metav1.Duration: a string time.ParseDuration accepts.
type Metav1_Duration struct{ time.Duration }

func (d *Metav1_Duration) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	pd, err := time.ParseDuration(str)
	if err != nil {
		return err
	}
	d.Duration = pd
	return nil
}

// Metav1_FieldsV1 is metav1.FieldsV1 (managedFields): any JSON value.
type Metav1_FieldsV1 struct {
	Raw []byte `json:"-"`
}

func (f *Metav1_FieldsV1) UnmarshalJSON(b []byte) error {
	if !bytes.Equal(b, []byte("null")) {
		f.Raw = append(f.Raw[0:0], b...)
	}
	return nil
}

// Apiextv1_JSON is apiextensionsv1.JSON: any JSON value.
type Apiextv1_JSON struct {
	Raw []byte `json:"-"`
}

func (s *Apiextv1_JSON) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && !bytes.Equal(data, []byte("null")) {
		s.Raw = append(s.Raw[0:0], data...)
	}
	return nil
}

// Intstr_IntOrString is intstr.IntOrString: a string, or a number that fits an int32.
type Intstr_IntOrString struct {
	Type   int64
	IntVal int32
	StrVal string
}

func (intstr *Intstr_IntOrString) UnmarshalJSON(value []byte) error {
	if value[0] == '"' {
		intstr.Type = 1
		return json.Unmarshal(value, &intstr.StrVal)
	}
	intstr.Type = 0
	return json.Unmarshal(value, &intstr.IntVal)
}

// Kubeadmv1beta1_BootstrapTokenString is CAPI v1beta1's BootstrapTokenString: "abcdef.0123456789abcdef".
type Kubeadmv1beta1_BootstrapTokenString struct {
	ID     string `json:"-"`
	Secret string `json:"-"`
}

func (bts *Kubeadmv1beta1_BootstrapTokenString) UnmarshalJSON(b []byte) error {
	var err error
	bts.ID, bts.Secret, err = bootstrapToken(b)
	return err
}

// Kubeadmv1beta2_BootstrapTokenString is CAPI v1beta2's BootstrapTokenString.
type Kubeadmv1beta2_BootstrapTokenString struct {
	ID     string `json:"-"`
	Secret string `json:"-"`
}

func (bts *Kubeadmv1beta2_BootstrapTokenString) UnmarshalJSON(b []byte) error {
	var err error
	bts.ID, bts.Secret, err = bootstrapToken(b)
	return err
}

// bootstrapToken is CAPI's BootstrapTokenString.UnmarshalJSON: every " removed, then
// cluster-bootstrap's \A([a-z0-9]{6})\.([a-z0-9]{16})\z.
func bootstrapToken(b []byte) (id, secret string, err error) {
	if len(b) == 0 {
		return "", "", nil
	}
	token := strings.ReplaceAll(string(b), `"`, ``)
	ok := len(token) == 23 && token[6] == '.'
	for i := 0; ok && i < len(token); i++ {
		c := token[i]
		ok = i == 6 || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
	}
	if !ok {
		return "", "", fmt.Errorf("the bootstrap token %q was not of the form %q", token, `\A([a-z0-9]{6})\.([a-z0-9]{16})\z`)
	}
	return token[:6], token[7:], nil
}

// Resource_Quantity is resource.Quantity: a number or a string in its grammar
// ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$ with a known suffix.
type Resource_Quantity struct {
	s string
}

var (
	errQuantityFormat  = errors.New("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
	errQuantityNumeric = errors.New("unable to parse numeric part of quantity")
	errQuantitySuffix  = errors.New("unable to parse quantity's suffix")
)

func (q *Resource_Quantity) UnmarshalJSON(value []byte) error {
	l := len(value)
	if l == 4 && bytes.Equal(value, []byte("null")) {
		q.s = ""
		return nil
	}
	if l >= 2 && value[0] == '"' && value[l-1] == '"' {
		value = value[1 : l-1]
	}
	s := strings.TrimSpace(string(value))
	if err := parseQuantity(s); err != nil {
		return err
	}
	q.s = s
	return nil
}

// parseQuantity is resource.ParseQuantity's verdict: its int64 fast path cannot fail, and where
// that path is not taken (too many digits, too small a scale, overflow) inf.Dec must parse the number.
func parseQuantity(str string) error {
	if len(str) == 0 {
		return errQuantityFormat
	}
	if str == "0" {
		return nil
	}
	value, num, denom, suf, err := parseQuantityString(str)
	if err != nil {
		return err
	}
	exponent, binary, ok := quantitySuffix(suf)
	if !ok {
		return errQuantitySuffix
	}
	fast := false
	if !binary {
		fast = int32(18)-int32(len(num)+len(denom)) >= 0 && exponent-int32(len(denom)) >= -9
	} else if exponent >= 0 && len(denom) == 0 && 15-int32(len(num))-int32(float32(exponent)*3/10)-1 >= 0 {
		v, _ := strconv.ParseInt(num, 10, 64)
		fast = !overflows(v, int64(1)<<uint64(exponent))
	}
	if fast {
		return nil
	}
	if _, ok := new(inf.Dec).SetString(value); !ok {
		return errQuantityNumeric
	}
	return nil
}

// overflows is the negation of resource's int64Multiply's ok.
func overflows(a, b int64) bool {
	if a == 0 || b == 0 || a == 1 || b == 1 {
		return false
	}
	if a == -1<<63 || b == -1<<63 {
		return true
	}
	return (a*b)/b != a
}

// parseQuantityString is resource's parseQuantityString (the sign is part of value).
func parseQuantityString(str string) (value, num, denom, suffix string, err error) {
	pos := 0
	end := len(str)
	if pos < end && (str[0] == '-' || str[0] == '+') {
		pos++
	}
	for i := pos; ; i++ { // leading zeros
		if i >= end {
			return "0", "0", "", "", nil
		}
		if str[i] != '0' {
			break
		}
		pos++
	}
	for i := pos; ; i++ { // numerator
		if i >= end {
			return str[0:end], str[pos:end], "", "", nil
		}
		if str[i] < '0' || str[i] > '9' {
			num = str[pos:i]
			pos = i
			break
		}
	}
	if len(num) == 0 {
		num = "0"
	}
	if pos < end && str[pos] == '.' { // denominator
		pos++
		for i := pos; ; i++ {
			if i >= end {
				return str[0:end], num, str[pos:end], "", nil
			}
			if str[i] < '0' || str[i] > '9' {
				denom = str[pos:i]
				pos = i
				break
			}
		}
	}
	value = str[0:pos]
	suffixStart := pos
	for i := pos; ; i++ {
		if i >= end {
			return value, num, denom, str[suffixStart:end], nil
		}
		if !strings.ContainsAny(str[i:i+1], "eEinumkKMGTP") {
			pos = i
			break
		}
	}
	if pos < end && (str[pos] == '-' || str[pos] == '+') {
		pos++
	}
	for i := pos; ; i++ {
		if i >= end {
			return value, num, denom, str[suffixStart:end], nil
		}
		if str[i] < '0' || str[i] > '9' {
			break
		}
	}
	return "", "", "", "", errQuantityFormat
}

// quantitySuffix is resource's suffixer.interpret: the power of ten (or of two) a suffix stands for.
func quantitySuffix(s string) (exponent int32, binary, ok bool) {
	switch s {
	case "":
		return 0, false, true
	case "n":
		return -9, false, true
	case "u":
		return -6, false, true
	case "m":
		return -3, false, true
	case "k":
		return 3, false, true
	case "M":
		return 6, false, true
	case "G":
		return 9, false, true
	case "T":
		return 12, false, true
	case "P":
		return 15, false, true
	case "E":
		return 18, false, true
	case "Ki", "Mi", "Gi", "Ti", "Pi", "Ei":
		return 10 * int32(strings.Index("KMGTPE", s[:1])+1), true, true
	}
	if len(s) > 1 && (s[0] == 'E' || s[0] == 'e') {
		parsed, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil {
			return 0, false, false
		}
		return int32(parsed), false, true
	}
	return 0, false, false
}
