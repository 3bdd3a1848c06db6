module github.com/vlc-embed/vlc/integrations/langchaingo

go 1.26.8

require (
	github.com/google/uuid v1.6.0
	github.com/tmc/langchaingo v0.1.14
	github.com/vlc-embed/vlc v0.0.0-unpublished
)

require (
	github.com/RoaringBitmap/roaring/v2 v2.14.4 // indirect
	github.com/bits-and-blooms/bitset v1.24.2 // indirect
	github.com/cogentcore/webgpu v0.23.0 // indirect
	github.com/dlclark/regexp2 v1.10.0 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/edsrzf/mmap-go v1.2.0 // indirect
	github.com/mschoch/smat v0.2.0 // indirect
	github.com/pkoukk/tiktoken-go v0.1.6 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/sys v0.38.0 // indirect
)

// The core module has no published version yet: v0.0.0-unpublished above
// names none, and this replace builds against the core in this repository.
// Go applies a replace only in the module being built, never for a module
// that depends on this one; once the core is tagged, the require names that
// tag and this replace stays for development (README, "Modules").
replace github.com/vlc-embed/vlc => ../..
