# vlc: make demo runs the main job on testdata, make test runs every test.
GO      ?= go
BIN     := bin/vlc
DEEP    := testdata/deep2k
DEMO    := demo-out

.PHONY: all build demo test test-long test-arm64 test-beam test-python vet bench bench-quality bench-search fuzz fuzz-brief soak clean

# Fuzz targets (package:Target). make fuzz FUZZTIME=10m runs each in turn;
# make test replays the corpus in testdata/fuzz and fuzzes each briefly, by
# a count of executions (about 5 s each on 2 cores) rather than a duration:
# Go 1.26's coordinator can fail a duration run at its deadline with a bare
# "context deadline exceeded" on a loaded machine (go.dev/issue/75804, fixed
# in Go 1.27), which CI must not take for a finding.
FUZZTIME ?= 10s
FUZZTMP  ?= $(shell test -d /dev/shm && echo /dev/shm || echo /tmp)
FUZZ_TARGETS := index/format:FuzzOpen index:FuzzIndex index:FuzzModel vecfile:FuzzOpenNpy \
	vecfile:FuzzOpenFvecs vecfile:FuzzOpenF16 vecfile:FuzzReadIvecs
FUZZ_BRIEF := index/format:FuzzOpen:25000x index:FuzzIndex:2000x index:FuzzModel:20000x vecfile:FuzzOpenNpy:80000x \
	vecfile:FuzzOpenFvecs:100000x vecfile:FuzzOpenF16:100000x vecfile:FuzzReadIvecs:100000x

all: build

build:
	$(GO) build -o $(BIN) ./cmd/vlc

# Compress 2,000 real Deep1B vectors (float16, 96 dimensions) and measure
# recall against their exact ground truth.
demo: build
	@mkdir -p $(DEMO)
	$(BIN) compress $(DEEP)/base.f16 -dim 96 -o $(DEMO)/deep2k.vlc
	$(BIN) eval $(DEMO)/deep2k.vlc -query $(DEEP)/query.fvecs -gt $(DEEP)/groundtruth.ivecs -nprobe 16
	$(BIN) eval $(DEMO)/deep2k.vlc -query $(DEEP)/query.fvecs -gt $(DEEP)/groundtruth.ivecs -nprobe 16 -rerank $(DEEP)/base.f16

# staticcheck, pinned: `go run` fetches this version through the module
# proxy the first time (about 30 s) and caches the build.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

# gofmt, go vet and staticcheck on every build tag: the default build, cuda
# (pure Go, so it is checked on any machine) and webgpu (cgo) where gcc is;
# purego; and a build for arm64 (NEON kernels, neon_arm64.s), checked
# here by vet and tested by make test under qemu.
vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) vet -tags cuda ./...
	$(GO) vet -tags purego ./...
	GOARCH=arm64 $(GO) build ./... && GOARCH=arm64 $(GO) vet ./...
	cd internal/vec/asm && $(GO) vet ./...
	$(STATICCHECK) ./...
	CGO_ENABLED=0 $(STATICCHECK) -tags cuda ./...

# make test: every package under the race detector with -short (where
# the tests that are long there skip: end-to-end runs on real data,
# golden hashes of long builds), then every package but the CLI's without
# it, in full (the goldens, recall on real data), less LONG_TESTS, whose
# -short forms ran in the first pass; examples/rag, which checks its own
# claims. Then the packages that use the SIMD
# kernels again under the purego tag (the pure-Go kernels, which must give
# the same bits: the goldens hold both), and the check that the generated
# assembly is what internal/vec/asm writes; the LangChainGo store, a module
# of its own (integrations/langchaingo: vet, staticcheck, tests under the race
# detector; its first run downloads LangChainGo through the module proxy).
# The cuda-tagged tests are compiled (they
# run on a GPU machine: docs/CUDA.md says how); then brief fuzzing; then the
# WebGPU backend's tests (cgo, build tag webgpu; -race works with its static
# wgpu-native library) on a Vulkan device. Where Mesa's lavapipe (Vulkan on
# the CPU) is missing and this runs as root with apt-get, it is installed
# first; when that fails the WebGPU tests skip, each saying why. With
# lavapipe present they must run (VLC_WEBGPU_REQUIRE=1 turns a missing
# adapter into a failure). The CLI package runs only its WebGPU tests with
# the tag: with a GPU backend built in, -backend auto takes it, and GPU
# reductions are not bit-for-bit reproducible, which TestFlagOrder demands
# of the CPU path. Every go test line has a -timeout with margin.
#
# make test-long runs what make test leaves out: the CLI's tests in full,
# LONG_TESTS, the Beam pipeline's tests (compiling the Beam SDK takes
# minutes) and the arm64 kernels under qemu.
LONG_TESTS := ^TestFrozenMerge$$
FULL_PKGS   = $(shell $(GO) list ./... | grep -v '/cmd/vlc$$')
test: vet
	$(GO) test -race -short -count=1 -timeout 10m ./...
	$(GO) test -count=1 -timeout 10m -skip '$(LONG_TESTS)' $(FULL_PKGS)
	$(GO) run ./examples/rag
	$(GO) test -tags purego -count=1 -timeout 10m ./internal/vec/ ./quant/ ./index/ ./backend/cpu/ ./anneal/... .
	cd internal/vec/asm && $(GO) test -count=1 -timeout 5m ./...
	cd integrations/langchaingo && $(GO) vet ./... && $(STATICCHECK) ./... && $(GO) test -race -count=1 -timeout 5m ./...
	cd loadtest && $(GO) vet ./... && $(STATICCHECK) ./...
	$(MAKE) --no-print-directory test-python
	CGO_ENABLED=0 $(GO) test -tags cuda -count=1 -timeout 5m -run '^$$' ./...
	$(MAKE) --no-print-directory fuzz-brief
	@lvp() { ls /usr/share/vulkan/icd.d/lvp_icd*.json /usr/lib/*/libvulkan.so.1 /usr/lib64/libvulkan.so.1 2>/dev/null | grep -q libvulkan; }; \
	pkgs="mesa-vulkan-drivers libvulkan1"; \
	if lvp; then echo "make test: lavapipe found"; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "make test: NOT installing lavapipe (needs root and apt-get): the WebGPU tests skip unless a Vulkan driver is present"; \
	else \
		echo "make test: installing Mesa's lavapipe ($$pkgs) for the WebGPU tests"; \
		log=$$(mktemp); \
		{ apt-get install -y -q $$pkgs \
			|| { apt-get -y -q --fix-broken install && apt-get install -y -q $$pkgs; } \
			|| { apt-get update -q && apt-get install -y -q $$pkgs; }; } >$$log 2>&1 \
		&& echo "make test: lavapipe installed" \
		|| { tail -n 20 $$log; echo "make test: installing lavapipe FAILED (apt's last lines above): the WebGPU tests will skip"; }; \
		rm -f $$log; \
	fi; \
	req=; if lvp; then req=1; fi; \
	if ! command -v gcc >/dev/null; then echo "make test: NOT running the WebGPU tests: they need cgo and there is no gcc"; exit 0; fi; \
	set -x; \
	CGO_ENABLED=1 $(GO) vet -tags webgpu ./backend/... ./cmd/vlc/ . && \
	CGO_ENABLED=1 $(STATICCHECK) -tags webgpu ./backend/... ./cmd/vlc/ . && \
	CGO_ENABLED=1 VLC_WEBGPU_REQUIRE=$$req $(GO) test -race -tags webgpu -count=1 -timeout 5m ./backend/webgpu/ && \
	CGO_ENABLED=1 VLC_WEBGPU_REQUIRE=$$req $(GO) test -race -tags webgpu -count=1 -timeout 5m -run WebGPU ./cmd/vlc/

test-long:
	$(GO) test -count=1 -timeout 20m ./cmd/vlc/
	$(GO) test -count=1 -timeout 20m -run '$(LONG_TESTS)' ./...
	REQUIRE_BEAM=1 $(MAKE) --no-print-directory test-beam
	$(MAKE) --no-print-directory test-arm64

# The arm64 build's kernels (NEON, and the purego ones) against their Go
# references, and the packages that use them, run under qemu's user-mode
# emulation. Where qemu-aarch64 is missing and this runs as root with
# apt-get, qemu-user is installed first; when that fails the step says so
# and is skipped (REQUIRE_ARM64=1 makes that a failure).
ARM64_PKGS := internal/vec quant
test-arm64:
	@qemu=$$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true); \
	if [ -z "$$qemu" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "make test: installing qemu-user for the arm64 tests"; \
		apt-get install -y -q qemu-user >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q qemu-user >/dev/null 2>&1; } || true; \
		qemu=$$(command -v qemu-aarch64 || true); \
	fi; \
	if [ -z "$$qemu" ]; then \
		echo "make test: NOT running the arm64 (NEON) kernel tests: no qemu-aarch64 (apt-get install qemu-user)"; \
		[ -z "$(REQUIRE_ARM64)" ] || exit 1; exit 0; \
	fi; \
	set -e; mkdir -p bin; for tags in "" purego; do for p in $(ARM64_PKGS); do \
		echo "arm64 under qemu: $$p $${tags:+(-tags $$tags)}"; \
		CGO_ENABLED=0 GOARCH=arm64 $(GO) test -c -tags "$$tags" -o bin/arm64.test ./$$p; \
		(cd $$p && $$qemu $(CURDIR)/bin/arm64.test -test.count=1 -test.short); \
	done; done

# The Apache Beam pipeline (beam/, a module of its own, so that the core
# carries none of Beam's dependencies): go vet, staticcheck, and its tests,
# which run the pipeline on Prism, Beam's local runner, in this process
# (no cluster). The first run downloads the Beam Go SDK through the module
# proxy; where that fails the step says so and is skipped (REQUIRE_BEAM=1
# makes that a failure); SKIP_BEAM=1 skips it, saying so.
test-beam:
	@if [ -n "$(SKIP_BEAM)" ]; then \
		echo "make test: NOT running the Beam pipeline's tests (beam/): SKIP_BEAM is set"; exit 0; \
	fi; \
	if ! (cd beam && $(GO) mod download) >/dev/null 2>&1; then \
		echo "make test: NOT running the Beam pipeline's tests (beam/): its modules could not be downloaded (cd beam && go mod download says why)"; \
		[ -z "$(REQUIRE_BEAM)" ] || exit 1; exit 0; \
	fi; \
	set -x; cd beam && $(GO) vet ./... && $(STATICCHECK) ./... && $(GO) test -count=1 -timeout 15m ./...

# The Python client (clients/python, standard library only) against a real
# `vlc serve` that its tests start on loopback with bin/vlc (VLC_BIN). Where
# python3 is missing the step says so and is skipped; the numpy test skips
# where numpy is missing.
# Debian's python3 (with its numpy) where there is one, else the PATH's.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
test-python: build
	@if ! command -v $(PYTHON) >/dev/null; then \
		echo "make test: NOT running the Python client's tests (clients/python): no $(PYTHON)"; exit 0; \
	fi; \
	set -x; VLC_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m unittest discover -s clients/python/tests -t clients/python -v

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} ($(FUZZTIME))"; \
		TMPDIR=$(FUZZTMP) $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./$${t%%:*}; \
	done

fuzz-brief:
	@set -e; for t in $(FUZZ_BRIEF); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; count=$${rest#*:}; \
		echo "fuzz $$name ($$count)"; \
		TMPDIR=$(FUZZTMP) $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $$count -fuzzminimizetime 10s ./$$pkg; \
	done

# The model-checked store test (internal/storemodel) at length: SOAK_OPS
# random operations from two library workers, the CLI and vlc serve, with
# concurrent readers and SIGKILLs, every answer checked against the model
# of what was acknowledged; the seed is the clock's unless SOAK_SEED is
# set, and a failure prints the command that reruns it. make test runs
# 150 operations with seed 1.
SOAK_OPS  ?= 5000
SOAK_SEED ?= 0
soak:
	$(GO) test -count=1 -timeout 3h -run TestStoreModel -v ./internal/storemodel -store.ops $(SOAK_OPS) -store.seed $(SOAK_SEED)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

# Recall, size and speed of every code on the shared datasets (minutes;
# fashion-mnist needs .data/fashion-mnist, see docs/bench/README.md).
bench-quality: build
	scripts/bench_quality.py $(DATASETS) | tee bench-out/vlc-tables.md

# vlc's and FAISS's best QPS at recall@10 0.90 and 0.95 (8 bits, SQ8) and
# 0.88 (4 bits, SQ4) on deep10k and sift5k-ngt, same threads (THREADS,
# default 2), one run, with the ratios (minutes; needs python3-faiss and
# DATA, default .data, as docs/bench/README.md says).
bench-search: build
	@mkdir -p bench-out
	scripts/bench_search.py $(DATASETS) | tee bench-out/search.md

clean:
	rm -rf bin $(DEMO)

# PTX of the CUDA kernels (backend/cuda), committed beside their sources.
# After changing a constant of backend/cuda/kernels.go run `make consts`
# (needs Go, not nvcc) to write consts.cuh; after that, or after changing
# kernels.cu or kernels_sm90.cu, run `make ptx` on a machine with nvcc
# (CUDA 13.0 made the committed PTX; that machine needs no Go).
# TestConstsHeader and TestPTXFresh fail while either step is due.
.PHONY: ptx consts asm
consts:
	$(GO) test ./backend/cuda -run TestConstsHeader -update
# The amd64 kernels of internal/vec, generated with avo by the module in
# internal/vec/asm (which alone depends on avo); commit what it writes.
asm:
	$(GO) generate ./internal/vec
ptx:
	nvcc -ptx -arch=compute_80 -O3 -o backend/cuda/kernels.ptx backend/cuda/kernels.cu
	nvcc -ptx -arch=compute_90a -O3 -o backend/cuda/kernels_sm90.ptx backend/cuda/kernels_sm90.cu
	nvcc -ptx -arch=compute_80 -O3 -o backend/cuda/search.ptx backend/cuda/search.cu
	nvcc -ptx -arch=compute_80 -O3 --fmad=false -o backend/cuda/search_codes.ptx backend/cuda/search_codes.cu
	nvcc -ptx -arch=compute_80 -O3 --fmad=false -o backend/cuda/graph_rows.ptx backend/cuda/graph_rows.cu
	cd backend/cuda && sha256sum consts.cuh kernels.cu > kernels.cu.sha256 && sha256sum consts.cuh kernels.cu kernels_sm90.cu > kernels_sm90.cu.sha256 && sha256sum search.cu > search.cu.sha256 && sha256sum search_codes.cu > search_codes.cu.sha256 && sha256sum graph_rows.cu > graph_rows.cu.sha256
