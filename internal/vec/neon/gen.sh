#!/bin/sh
# Regenerates ../neon_arm64.s and ../neon_arm64.go (or, given a folder named
# vec, the two files there) from neon_arm64.c with
# GoAT (github.com/gorse-io/goat), clang and aarch64 binutils:
#   apt-get install clang binutils-aarch64-linux-gnu
#   go install github.com/gorse-io/goat@main   (commit 90f78a3 made them)
# The committed files were made with Debian 12's clang 14.0.6 and binutils
# 2.40; TestNEONGenerated checks them where the same versions are found.
# -ffp-contract=off keeps multiplies and adds apart, as the Go references
# compute them; -ffreestanding lets clang's arm_neon.h build without an
# aarch64 C library.
set -e
cd "$(dirname "$0")"
out=${1:-$(cd .. && pwd)}
goat neon_arm64.c -t arm64 -O3 -e=-ffp-contract=off -e=-ffreestanding -o "$out"
gofmt -w "$out/neon_arm64.go"
rm -f neon_arm64.o neon_arm64.s # GoAT's intermediates, beside the source
