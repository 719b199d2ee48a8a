package qcow2

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

var be = binary.BigEndian

// firstL2 returns the file offset of the first L2 table and of its first allocated entry.
func firstL2(t *testing.T, b []byte) (table, entry int64) {
	t.Helper()
	l1 := int64(be.Uint64(b[40:]))
	for i := int64(0); i < int64(be.Uint32(b[36:])); i++ {
		if off := int64(be.Uint64(b[l1+8*i:]) & offsetMask); off != 0 {
			for j := int64(0); j < 1<<13; j++ {
				if be.Uint64(b[off+8*j:]) != 0 {
					return off, off + 8*j
				}
			}
		}
	}
	t.Fatal("no allocated L2 entry")
	return 0, 0
}

// Acceptance 4: bad inputs give a clear error, never a panic or a wrong read.
func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	plain := filepath.Join(dir, "plain.qcow2")
	testutil.QemuImg(t, "convert", "-f", "raw", "-O", "qcow2", raw, plain)
	compressed := filepath.Join(dir, "c.qcow2")
	testutil.QemuImg(t, "convert", "-c", "-f", "raw", "-O", "qcow2", raw, compressed)
	orig, _ := os.ReadFile(plain)
	origC, _ := os.ReadFile(compressed)
	testutil.QemuImg(t, "create", "-q", "-f", "qcow2", filepath.Join(dir, "base.qcow2"), "1M")
	fromQemu := func(args ...string) func(*testing.T) []byte {
		return func(t *testing.T) []byte {
			p := filepath.Join(dir, "made.qcow2")
			os.Remove(p)
			testutil.QemuImg(t, append(append([]string{"create", "-q", "-f", "qcow2"}, args...), p, "1M")...)
			b, _ := os.ReadFile(p)
			return b
		}
	}
	patch := func(src []byte, f func(b []byte)) func(*testing.T) []byte {
		return func(t *testing.T) []byte {
			b := append([]byte(nil), src...)
			f(b)
			return b
		}
	}
	for _, tc := range []struct {
		name string
		make func(*testing.T) []byte
		want string
		err  error
	}{
		{"empty file", patch(nil, func([]byte) {}), "", nil},
		{"truncated header", patch(orig[:50], func([]byte) {}), "truncated header", errCorrupt},
		{"truncated v3 header", patch(orig[:90], func([]byte) {}), "truncated", errCorrupt},
		{"truncated in the data", patch(orig[:len(orig)/2], func([]byte) {}), "past the end of the file", errCorrupt},
		{"truncated in the tables", patch(orig[:3*65536+100], func([]byte) {}), "past the end of the file", errCorrupt},
		{"truncated compressed", patch(origC[:len(origC)-200000], func([]byte) {}), "past the end of the file", errCorrupt},
		{"version 4", patch(orig, func(b []byte) { be.PutUint32(b[4:], 4) }), "qcow2 version 4", errUnsupported},
		{"cluster_bits 30", patch(orig, func(b []byte) { be.PutUint32(b[20:], 30) }), "cluster_bits 30", errCorrupt},
		{"cluster_bits 8", patch(orig, func(b []byte) { be.PutUint32(b[20:], 8) }), "cluster_bits 8", errCorrupt},
		{"huge virtual size", patch(orig, func(b []byte) { be.PutUint64(b[24:], 1<<62) }), "is too large, not supported", errUnsupported},
		{"virtual size beyond L1", patch(orig, func(b []byte) { be.PutUint64(b[24:], 1<<45) }), "the virtual size needs", errCorrupt},
		{"huge L1", patch(orig, func(b []byte) { be.PutUint32(b[36:], 1<<30) }), "L1 table", errCorrupt},
		{"L1 past the end", patch(orig, func(b []byte) { be.PutUint64(b[40:], 1<<40) }), "L1 table at 0x10000000000", errCorrupt},
		{"L1 unaligned", patch(orig, func(b []byte) { be.PutUint64(b[40:], 65536+8) }), "not cluster aligned", errCorrupt},
		{"L1 on the header", patch(orig, func(b []byte) { be.PutUint64(b[40:], 0) }), "overlaps the header", errCorrupt},
		{"refcount table too big", patch(orig, func(b []byte) { be.PutUint32(b[56:], 1<<20) }), "refcount table", errCorrupt},
		{"header_length too big", patch(orig, func(b []byte) { be.PutUint32(b[100:], 1<<20) }), "header_length", errCorrupt},
		{"refcount_order 9", patch(orig, func(b []byte) { be.PutUint32(b[96:], 9) }), "refcount_order", errCorrupt},
		{"L1 entry past the end", patch(orig, func(b []byte) {
			l1 := be.Uint64(b[40:])
			be.PutUint64(b[l1:], 1<<40|flagCopied)
		}), "L2 table at 0x10000000000 points past the end", errCorrupt},
		{"L2 entry past the end", patch(orig, func(b []byte) {
			_, e := firstL2(t, b)
			be.PutUint64(b[e:], uint64(len(b)+65536)|flagCopied)
		}), "data cluster at", errCorrupt},
		{"L2 entry unaligned", patch(orig, func(b []byte) {
			_, e := firstL2(t, b)
			be.PutUint64(b[e:], be.Uint64(b[e:])+512)
		}), "not cluster aligned", errCorrupt},
		{"L2 entry with reserved bits", patch(orig, func(b []byte) {
			_, e := firstL2(t, b)
			be.PutUint64(b[e:], be.Uint64(b[e:])|1<<57)
		}), "reserved bits", errCorrupt},
		{"L2 entry on the L1 table", patch(orig, func(b []byte) {
			_, e := firstL2(t, b)
			be.PutUint64(b[e:], be.Uint64(b[40:])|flagCopied)
		}), "overlaps the image header or tables", errCorrupt},
		{"compressed entry past the end", patch(origC, func(b []byte) {
			_, e := firstL2(t, b)
			be.PutUint64(b[e:], flagCompress|uint64(len(b)+1000))
		}), "compressed cluster at", errCorrupt},
		{"compressed garbage", patch(origC, func(b []byte) {
			_, e := firstL2(t, b)
			coff := be.Uint64(b[e:]) & (1<<54 - 1)
			for i := coff; i < coff+64; i++ {
				b[i] = 0xff
			}
		}), "does not decode", errCorrupt},
		{"refcount block zeroed", patch(orig, func(b []byte) {
			rb := be.Uint64(b[be.Uint64(b[48:]):])
			clear(b[rb : rb+65536])
		}), "refcount is 0", errCorrupt},
		{"refcount table entry past the end", patch(orig, func(b []byte) {
			be.PutUint64(b[be.Uint64(b[48:]):], 1<<40)
		}), "refcount block at 0x10000000000", errCorrupt},
		{"LUKS encryption", patch(orig, func(b []byte) { be.PutUint32(b[32:], 2) }), "encrypted images (LUKS", errUnsupported},
		{"AES encryption", patch(orig, func(b []byte) { be.PutUint32(b[32:], 1) }), "encrypted images (AES", errUnsupported},
		{"backing file", fromQemu("-b", filepath.Join(dir, "base.qcow2"), "-F", "qcow2"), "backing file", errUnsupported},
		{"external data file", fromQemu("-o", "data_file="+filepath.Join(dir, "data.raw")), "external data files", errUnsupported},
		{"zstd", fromQemu("-o", "compression_type=zstd"), "zstd compression", errUnsupported},
		{"extended L2", fromQemu("-o", "extended_l2=on"), "extended L2", errUnsupported},
		{"unknown incompatible bit", patch(orig, func(b []byte) { be.PutUint64(b[72:], 1<<10) }), "unknown incompatible feature bit 10", errUnsupported},
		{"marked corrupt", patch(orig, func(b []byte) { be.PutUint64(b[72:], incompatCorrupt) }), "marked corrupt", errCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "bad.qcow2")
			if err := os.WriteFile(p, tc.make(t), 0o644); err != nil {
				t.Fatal(err)
			}
			err := toRaw(t, p, filepath.Join(dir, "bad.raw"))
			if tc.want == "" { // not even a qcow2 magic: Open refuses it too
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want one containing %q wrapping %v", err, tc.want, tc.err)
			}
		})
	}
}

// A dirty image (lazy refcounts not yet written) is still read, without refcount checks.
func TestDirtyImageIsRead(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	img := filepath.Join(dir, "d.qcow2")
	testutil.QemuImg(t, "convert", "-f", "raw", "-O", "qcow2", raw, img)
	b, _ := os.ReadFile(img)
	be.PutUint64(b[72:], incompatDirty)
	rb := be.Uint64(b[be.Uint64(b[48:]):])
	clear(b[rb : rb+65536])
	os.WriteFile(img, b, 0o644)
	out := filepath.Join(dir, "d.raw")
	if err := toRaw(t, img, out); err != nil {
		t.Fatal(err)
	}
	sameFile(t, out, raw)
}
