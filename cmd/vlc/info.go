package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
	"github.com/vlc-embed/vlc/store"
)

func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	st, err := vlc.Open(pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	in, err := st.Info()
	if err != nil {
		return err
	}
	// The trained segment (the index file itself, unless vectors were
	// added or deleted since) describes the training and the code, as
	// the version Open read holds it (not reopened by name: another
	// process may have replaced it since).
	m := in.Meta
	trained := in.Segments[0].Bytes
	type segment struct {
		File     string  `json:"file"`
		Rows     int     `json:"rows"`
		Deleted  int     `json:"deleted"`
		Added    bool    `json:"added"`
		Energy   float64 `json:"energy"`
		Bytes    int64   `json:"bytes"`
		IDs      bool    `json:"ids"`
		Payloads bool    `json:"payloads"`
		Graph    bool    `json:"graph"` // the file holds a graph that searches walk
	}
	var segs []segment
	for _, s := range in.Segments {
		segs = append(segs, segment(s))
	}
	sizes := slices.Clone(in.ListSizes)
	slices.Sort(sizes)
	type section struct {
		Kind   string `json:"kind"`
		Offset int64  `json:"offset"`
		Length int64  `json:"length"`
		CRC    string `json:"crc32c"`
	}
	var secs []section
	for _, s := range in.Sections {
		secs = append(secs, section{s.Kind.String(), int64(s.Offset), int64(s.Length), fmt.Sprintf("%08x", s.CRC)})
	}
	info := map[string]any{
		"path": pos[0], "bytes": trained, "vectors": m.N, "dim": m.Dim, "anchors": m.M,
		"bits": m.Bits, "subspaces": m.Subspaces, "ip_codes": m.Flags&index.FlagIPCodes != 0, "bits_per_dim": m.CodeSpec().BitsPerDim(), "code": quant.Kind(m.Code).String(), "metric": m.Metric.String(), "seed": m.Seed,
		"iterations": m.Iterations, "converged": m.Converged == 1, "merged": m.Merged, "split": m.Split,
		"energy": m.Energy, "init_energy": m.InitEnergy,
		"bytes_per_vector": float64(trained) / float64(m.N),
		"size_ratio":       index.SizeRatio(trained, int(m.N), int(m.Dim)),
		"list_min":         sizes[0], "list_median": sizes[len(sizes)/2], "list_max": sizes[len(sizes)-1],
		"sections": secs,
		"live":     in.Rows, "deleted": in.Deleted, "segments": segs, "drift": in.Drift, "store_bytes": in.Bytes,
		"policy": in.Policy,
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(info)
	}
	fmt.Fprintf(stdout, "%s: vlc index, %d bytes\n", pos[0], trained)
	fmt.Fprintf(stdout, "  vectors     %d x %d, metric %s\n", m.N, m.Dim, m.Metric)
	fmt.Fprintf(stdout, "  anchors     %d (list sizes: min %d, median %d, max %d)\n", m.M, sizes[0], sizes[len(sizes)/2], sizes[len(sizes)-1])
	fmt.Fprintf(stdout, "  codes       %s\n", m.CodeSpec())
	fmt.Fprintf(stdout, "  size        %.1f bytes/vector, %.3f of float16\n", info["bytes_per_vector"], info["size_ratio"])
	fmt.Fprintf(stdout, "  training    seed %d, %d iterations (converged %v), %d merged, %d split, energy %.6g -> %.6g\n",
		m.Seed, m.Iterations, m.Converged == 1, m.Merged, m.Split, m.InitEnergy, m.Energy)
	for _, s := range secs {
		fmt.Fprintf(stdout, "  section %s  offset %10d  length %10d  crc32c %s\n", s.Kind, s.Offset, s.Length, s.CRC)
	}
	fmt.Fprintf(stdout, "  rows        %d live, %d deleted, in %d segment(s), %d bytes in all\n", in.Rows, in.Deleted, len(in.Segments), in.Bytes)
	for _, s := range segs {
		kind := "trained"
		if s.Added {
			kind = "added"
		}
		if s.Graph {
			kind += ", graph"
		}
		fmt.Fprintf(stdout, "  segment     %s: %d rows, %d deleted, %s, ids %v, payloads %v, energy %.6g, %d bytes\n", s.File, s.Rows, s.Deleted, kind, s.IDs, s.Payloads, s.Energy, s.Bytes)
	}
	if p := in.Policy; p.GraphAt > 0 {
		lists := ""
		if p.GraphCompact {
			lists = ", compact lists"
		}
		fmt.Fprintf(stdout, "  graphs      %s; built in the background for segments of at least %d live rows (degree %d, alpha %g, %s%s)\n",
			graphCount(in), p.GraphAt, cmp.Or(p.GraphDegree, 32), cmp.Or(p.GraphAlpha, 1.1), candidatesFrom(max(0, cmp.Or(p.GraphNProbe, store.DefaultGraphNProbe))), lists)
	} else if strings.Contains(graphFiles(in), "\n") {
		fmt.Fprintf(stdout, "  graphs      %s\n", graphCount(in))
	}
	if in.Drift > 0 {
		fmt.Fprintf(stdout, "  drift       added vectors lie %.2fx as far (squared) from their anchors as the trained ones\n", in.Drift)
	}
	if in.Drift > vlc.DriftWarn {
		fmt.Fprintf(stderr, "warning: the anchors no longer fit the added vectors (drift above %.2f): run vlc retrain %s\n", vlc.DriftWarn, pos[0])
	}
	return nil
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	// Open checks every checksum of the manifest and of each segment;
	// Verify then checks the row ids, ids and payloads of each.
	st, err := vlc.Open(pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Verify(); err != nil {
		return err
	}
	in, err := st.Info()
	if err != nil {
		return err
	}
	if len(in.Segments) == 1 && in.Segments[0].File == pos[0] {
		fmt.Fprintf(stdout, "%s: ok (%d sections, %d bytes, every checksum matches)\n", pos[0], len(in.Sections), in.Bytes)
		return nil
	}
	fmt.Fprintf(stdout, "%s: ok (%d segments, %d live and %d deleted vectors, %d bytes, every checksum matches)\n", pos[0], len(in.Segments), in.Rows, in.Deleted, in.Bytes)
	return nil
}
