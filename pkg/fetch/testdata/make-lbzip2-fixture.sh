#!/usr/bin/env bash
# Makes lbzip2-seq.bz2: `seq 1 50000` (288,894 bytes) compressed by lbzip2 -1 -n2, i.e. one
# stream of 3 blocks of 100k whose magics sit at arbitrary bit offsets, with lbzip2's own
# Huffman tables. pkg/fetch's tests decode it without needing lbzip2 installed. Made with
# lbzip2 2.5 (Debian 12); the sha256 is checked by TestStreamDecodesLbzip2.
set -euo pipefail
cd "$(dirname "$0")"
seq 1 50000 | lbzip2 -1 -n2 > lbzip2-seq.bz2
sha256sum lbzip2-seq.bz2 > lbzip2-seq.bz2.sha256
cat lbzip2-seq.bz2.sha256
