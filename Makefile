# vlc: make demo runs the main job on testdata, make test runs every test.
GO      ?= go
BIN     := bin/vlc
DEEP    := testdata/deep2k
DEMO    := demo-out

.PHONY: all build demo test vet bench bench-quality fuzz clean

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

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# Every test, with the race detector. GPU backends are not built yet, so
# nothing is skipped for want of hardware.
test: vet
	$(GO) test -race -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

# Recall, size and speed of every code on the shared datasets (minutes;
# fashion-mnist needs .data/fashion-mnist, see docs/BENCHMARKS.md).
bench-quality: build
	scripts/bench_quality.py $(DATASETS) | tee bench-out/vlc-tables.md

clean:
	rm -rf bin $(DEMO)

# PTX of the CUDA kernels (gpu/cuda), committed beside their source: run on a
# machine with nvcc (CUDA 13.0 made the committed one) after changing
# kernels.cu. TestPTXFresh fails while the recorded hash is stale.
.PHONY: ptx
ptx:
	nvcc -ptx -arch=compute_80 -O3 -o gpu/cuda/kernels.ptx gpu/cuda/kernels.cu
	cd gpu/cuda && sha256sum kernels.cu > kernels.cu.sha256
