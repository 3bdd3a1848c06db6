package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	ix, err := index.Open(pos[0], index.Options{})
	if err != nil {
		return err
	}
	defer ix.Close()
	m := ix.Meta()
	sizes := ix.ListSizes()
	slices.Sort(sizes)
	type section struct {
		Kind   string `json:"kind"`
		Offset int64  `json:"offset"`
		Length int64  `json:"length"`
		CRC    string `json:"crc32c"`
	}
	var secs []section
	for _, s := range ix.Sections() {
		secs = append(secs, section{s.Kind.String(), int64(s.Offset), int64(s.Length), fmt.Sprintf("%08x", s.CRC)})
	}
	info := map[string]any{
		"path": pos[0], "bytes": ix.Size(), "vectors": m.N, "dim": m.Dim, "anchors": m.M,
		"bits": m.Bits, "subspaces": m.Subspaces, "ip_codes": m.Flags&index.FlagIPCodes != 0, "bits_per_dim": m.CodeSpec().BitsPerDim(), "code": quant.Kind(m.Code).String(), "metric": m.Metric.String(), "seed": m.Seed,
		"iterations": m.Iterations, "converged": m.Converged == 1, "merged": m.Merged, "split": m.Split,
		"energy": m.Energy, "init_energy": m.InitEnergy,
		"bytes_per_vector": ix.BytesPerVector(),
		"size_ratio":       ix.SizeRatio(),
		"list_min":         sizes[0], "list_median": sizes[len(sizes)/2], "list_max": sizes[len(sizes)-1],
		"sections": secs,
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(info)
	}
	fmt.Fprintf(stdout, "%s: vlc index, %d bytes\n", pos[0], ix.Size())
	fmt.Fprintf(stdout, "  vectors     %d x %d, metric %s\n", m.N, m.Dim, m.Metric)
	fmt.Fprintf(stdout, "  anchors     %d (list sizes: min %d, median %d, max %d)\n", m.M, sizes[0], sizes[len(sizes)/2], sizes[len(sizes)-1])
	fmt.Fprintf(stdout, "  codes       %s\n", m.CodeSpec())
	fmt.Fprintf(stdout, "  size        %.1f bytes/vector, %.3f of float16\n", info["bytes_per_vector"], info["size_ratio"])
	fmt.Fprintf(stdout, "  training    seed %d, %d iterations (converged %v), %d merged, %d split, energy %.6g -> %.6g\n",
		m.Seed, m.Iterations, m.Converged == 1, m.Merged, m.Split, m.InitEnergy, m.Energy)
	for _, s := range secs {
		fmt.Fprintf(stdout, "  section %s  offset %10d  length %10d  crc32c %s\n", s.Kind, s.Offset, s.Length, s.CRC)
	}
	return nil
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	ix, err := index.Open(pos[0], index.Options{Verify: true})
	if err != nil {
		return err
	}
	defer ix.Close()
	fmt.Fprintf(stdout, "%s: ok (%d sections, %d bytes, every checksum matches)\n", pos[0], len(ix.Sections()), ix.Size())
	return nil
}
