module github.com/vlc-embed/vlc

go 1.26.8

require (
	github.com/edsrzf/mmap-go v1.2.0
	github.com/schollz/progressbar/v3 v3.18.0
	github.com/x448/float16 v0.8.4
	golang.org/x/term v0.37.0
)

require (
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/sys v0.38.0 // indirect
)
