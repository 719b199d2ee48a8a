// Command bunzip2 decompresses stdin to stdout with pkg/bzip2; the bzip2
// benchmark (scripts/bench/bzip2.sh) times it against bzip2 and lbzip2.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/bzip2"
)

func main() {
	workers := flag.Int("workers", 0, "decoding goroutines (0 = GOMAXPROCS)")
	flag.Parse()
	zr := bzip2.NewReaderWorkers(bufio.NewReaderSize(os.Stdin, 1<<20), *workers)
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if _, err := io.Copy(w, zr); err != nil {
		fmt.Fprintln(os.Stderr, "bunzip2:", err)
		os.Exit(1)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "bunzip2:", err)
		os.Exit(1)
	}
}
