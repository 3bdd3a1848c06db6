module github.com/vlc-embed/vlc/loadtest

go 1.26.8

require (
	github.com/tsenart/vegeta/v12 v12.13.0
	github.com/vlc-embed/vlc v0.0.0-unpublished
)

require (
	github.com/RoaringBitmap/roaring/v2 v2.14.4 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/bits-and-blooms/bitset v1.24.2 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cogentcore/webgpu v0.23.0 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/edsrzf/mmap-go v1.2.0 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/josharian/intern v1.0.0 // indirect
	github.com/mailru/easyjson v0.7.7 // indirect
	github.com/mschoch/smat v0.2.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.22.0 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/common v0.62.0 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
	github.com/rs/dnscache v0.0.0-20230804202142-fc85eb664529 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/net v0.33.0 // indirect
	golang.org/x/sync v0.12.0 // indirect
	golang.org/x/sys v0.38.0 // indirect
	golang.org/x/text v0.23.0 // indirect
	google.golang.org/protobuf v1.36.5 // indirect
)

// The core module has no published version yet: v0.0.0-unpublished above
// names none, and this replace builds against the core in this repository.
// Go applies a replace only in the module being built, never for a module
// that depends on this one; once the core is tagged, the require names that
// tag and this replace stays for development (README, "Modules").
replace github.com/vlc-embed/vlc => ../
