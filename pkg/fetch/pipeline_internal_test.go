package fetch

import (
	"bytes"
	stdbzip2 "compress/bzip2"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dsbzip2 "github.com/dsnet/compress/bzip2"
)

// lbzip2Fixture is testdata/lbzip2-seq.bz2 (testdata/make-lbzip2-fixture.sh), checked against its
// recorded sha256: lbzip2's stream shape (Flatcar's .bz2 files) without lbzip2 installed.
func lbzip2Fixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "lbzip2-seq.bz2"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join("testdata", "lbzip2-seq.bz2.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != strings.Fields(string(rec))[0] {
		t.Fatalf("testdata/lbzip2-seq.bz2 has sha256 %x, not the recorded one: re-run testdata/make-lbzip2-fixture.sh", sum)
	}
	return b
}

// seqText is what the fixture holds: the output of `seq 1 50000`.
func seqText() []byte {
	var b bytes.Buffer
	for i := 1; i <= 50000; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.Bytes()
}

func sha512Hex(b []byte) string {
	s := sha512.Sum512(b)
	return hex.EncodeToString(s[:])
}

// lbzip2's one stream of several blocks, and pbzip2-style concatenated streams, decode whole; the
// digest is the input's.
func TestStreamDecodesLbzip2(t *testing.T) {
	fix, seq := lbzip2Fixture(t), seqText()
	for name, c := range map[string]struct{ in, want []byte }{
		"lbzip2, one stream of 3 blocks": {fix, seq},
		"two concatenated streams":       {append(append([]byte{}, fix...), fix...), append(append([]byte{}, seq...), seq...)},
	} {
		var out bytes.Buffer
		digest, n, err := stream(context.Background(), bytes.NewReader(c.in), true, &out)
		if err != nil || !bytes.Equal(out.Bytes(), c.want) || n != int64(len(c.want)) || digest != sha512Hex(c.in) {
			t.Errorf("%s: %d bytes (equal: %v), err %v, digest ok: %v", name, n, bytes.Equal(out.Bytes(), c.want), err, digest == sha512Hex(c.in))
		}
	}
}

// Damaged bzip2 is a DecodeError, never short output taken as whole, and the digest still covers
// every byte (so fetch can tell a damaged original from a tampered download).
func TestStreamBadBzip2(t *testing.T) {
	fix := lbzip2Fixture(t)
	flipped := append([]byte{}, fix...)
	flipped[len(flipped)/2] ^= 0x10
	for name, in := range map[string][]byte{
		"truncated":            fix[:len(fix)*2/3],
		"cut before the end":   fix[:len(fix)-3],
		"a bit flipped":        flipped,
		"garbage after":        append(append([]byte{}, fix...), "trailing"...),
		"not bzip2":            []byte("QFI\xfb this is a qcow2 header, not bzip2"),
		"empty":                {},
		"header only":          []byte("BZh9"),
		"randomised-looking 0": append([]byte("BZh91AY&SY"), make([]byte, 64)...),
	} {
		digest, _, err := stream(context.Background(), bytes.NewReader(in), true, io.Discard)
		var de *decodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), "not valid bzip2") {
			t.Errorf("%s: err %v, want a DecodeError", name, err)
		}
		if digest != sha512Hex(in) {
			t.Errorf("%s: digest %q, want the whole input's", name, digest)
		}
	}
}

// A failing source is reported as itself (a network failure), not as corrupt bzip2.
func TestStreamSourceErrorWins(t *testing.T) {
	fix := lbzip2Fixture(t)
	dropped := errors.New("connection reset")
	src := io.MultiReader(bytes.NewReader(fix[:len(fix)/2]), &failing{dropped})
	digest, _, err := stream(context.Background(), src, true, io.Discard)
	if !errors.Is(err, dropped) || digest != "" {
		t.Fatalf("got %q, %v; want the source's error and no digest", digest, err)
	}
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

// zeroStreams is n concatenated bzip2 streams of 8 MiB of zeros each: a few hundred bytes that
// decode for a long time without another read of the source.
func zeroStreams(t testing.TB, n int) []byte {
	t.Helper()
	var one bytes.Buffer
	zw, err := dsbzip2.NewWriter(&one, &dsbzip2.WriterConfig{Level: 9})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(one.Bytes(), n)
}

// cancelAfter cancels once more than limit bytes went through it.
type cancelAfter struct {
	n, limit int64
	cancel   func()
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	if c.n += int64(len(p)); c.n > c.limit {
		c.cancel()
	}
	return len(p), nil
}

// Ctrl-C stops decoding promptly even when the decoder has no reason to read the source again
// for a long time (8 GiB of output from a few hundred KiB here).
func TestStreamStopsWhenCancelled(t *testing.T) {
	in := zeroStreams(t, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelAfter{limit: 32 << 20, cancel: cancel}
	done := make(chan error, 1)
	go func() {
		_, _, err := stream(ctx, bytes.NewReader(in), true, out)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if out.n > 1<<30 {
			t.Errorf("%d bytes decoded after the cancel at 32 MiB", out.n)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still decoding 20 s after the cancel (%d bytes out)", out.n)
	}
}

// Any input: no panic escapes the decoder, the digest covers the whole input, and what decodes
// decodes as the standard library's reader says.
func FuzzStreamBzip2(f *testing.F) {
	fix := lbzip2Fixture(f)
	f.Add(fix)
	f.Add(fix[:len(fix)/2])
	f.Add([]byte("BZh91AY&SY"))
	f.Add([]byte("BZh9\x17rE8P\x90\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out limited
		digest, _, err := stream(context.Background(), bytes.NewReader(in), true, &out)
		if digest != sha512Hex(in) && !errors.Is(err, errLimit) {
			t.Fatalf("digest %q, err %v: want the input's digest", digest, err)
		}
		if err != nil {
			return
		}
		std, serr := io.ReadAll(io.LimitReader(stdbzip2.NewReader(bytes.NewReader(in)), outputLimit+1))
		if serr == nil && !bytes.Equal(std, out.Bytes()) {
			t.Fatalf("decoded %d bytes, compress/bzip2 %d, and they differ", out.Len(), len(std))
		}
	})
}

var errLimit = errors.New("output limit")

// limited holds at most outputLimit bytes (a few bytes of bzip2 expand to ~46 MB a block).
const outputLimit = 8 << 20

type limited struct{ bytes.Buffer }

func (l *limited) Write(p []byte) (int, error) {
	if l.Len()+len(p) > outputLimit {
		return 0, &writeError{Path: "limit", Err: errLimit}
	}
	return l.Buffer.Write(p)
}
