package storemodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/vlc-embed/vlc"
	"github.com/x448/float16"
)

// dim is the vectors' dimension: small, as every check is about which
// vectors the store holds, not about the codes.
const dim = 16

// vector is the vector of generation g: normal values rounded to float16,
// so that a float16 file, JSON and float32 carry it alike. Every vector
// an add writes has a generation of its own, kept in its payload, so a
// hit tells which write it came from.
func vector(g uint64) []float32 {
	r := rand.New(rand.NewPCG(g, 0x5eed))
	v := make([]float32, dim)
	for i := range v {
		v[i] = float16.Fromfloat32(float32(r.NormFloat64())).Float32()
	}
	return v
}

func payload(g uint64) []byte { return fmt.Appendf(nil, `{"g":%d}`, g) }

// generation reads a payload back; ok false for one no write made.
func generation(p []byte) (uint64, bool) {
	var v struct {
		G *uint64 `json:"g"`
	}
	if json.Unmarshal(p, &v) != nil || v.G == nil {
		return 0, false
	}
	return *v.G, true
}

// doc is a vector to add: its id ("" lets the store pick one) and
// generation.
type doc struct {
	ID string `json:"id"`
	G  uint64 `json:"g"`
}

// request is one operation sent to a client.
type request struct {
	Op    string   `json:"op"` // add delete compact retrain refresh get scan topk len merge
	Docs  []doc    `json:"docs,omitempty"`
	IDs   []string `json:"ids,omitempty"`
	Query uint64   `json:"query,omitempty"` // generation of the query vector
	K     int      `json:"k,omitempty"`
	Out   string   `json:"out,omitempty"` // merge's output
}

// hit is a search result: id, distance and the generation its payload
// names.
type hit struct {
	ID string  `json:"id"`
	D  float32 `json:"d"`
	G  uint64  `json:"g"`
}

// response is a client's answer. Kind classes an error: "locked",
// "duplicate", "notfound" or "other".
type response struct {
	Err  string   `json:"err,omitempty"`
	Kind string   `json:"kind,omitempty"`
	IDs  []string `json:"ids,omitempty"` // add: the ids, where the client tells them
	Hits []hit    `json:"hits,omitempty"`
	G    uint64   `json:"g,omitempty"`
	Len  int      `json:"len,omitempty"`
}

func kindOf(err error) string {
	switch {
	case errors.Is(err, vlc.ErrLocked):
		return "locked"
	case errors.Is(err, vlc.ErrDuplicateID):
		return "duplicate"
	case errors.Is(err, vlc.ErrNotFound):
		return "notfound"
	}
	return "other"
}

// workerEnv, set to a store's path, makes the test binary a worker: a
// library handle of that store kept open across operations, read from
// stdin and answered on stdout, one JSON object a line.
const workerEnv = "VLC_STOREMODEL_WORKER"

func runWorker(path string) {
	enc := json.NewEncoder(os.Stdout)
	ix, err := vlc.Open(path)
	if err != nil {
		enc.Encode(response{Err: err.Error(), Kind: kindOf(err)})
		os.Exit(1)
	}
	enc.Encode(response{}) // ready: the version read now is its view
	dec := json.NewDecoder(os.Stdin)
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			os.Exit(0)
		}
		enc.Encode(libDo(ix, req))
	}
}

// libDo runs one operation on a library handle.
func libDo(ix *vlc.Store, req request) (resp response) {
	ctx := context.Background()
	var err error
	switch req.Op {
	case "refresh":
		err = ix.Refresh()
	case "add":
		docs := make([]vlc.Document, len(req.Docs))
		for i, d := range req.Docs {
			docs[i] = vlc.Document{ID: d.ID, Vector: vector(d.G), Payload: payload(d.G)}
		}
		resp.IDs, err = ix.Add(ctx, docs)
	case "upsert":
		docs := make([]vlc.Document, len(req.Docs))
		for i, d := range req.Docs {
			docs[i] = vlc.Document{ID: d.ID, Vector: vector(d.G), Payload: payload(d.G)}
		}
		resp.IDs, err = ix.Upsert(ctx, docs)
	case "delete":
		err = ix.Delete(ctx, req.IDs)
	case "compact":
		err = ix.Compact(ctx)
	case "retrain":
		_, err = ix.Retrain(ctx, vlc.Options{Backend: "cpu", MaxIter: 5})
	case "get":
		var rec vlc.Record
		if rec, err = ix.Get(req.IDs[0]); err == nil {
			g, ok := generation(rec.Payload)
			if !ok {
				err = fmt.Errorf("id %s: payload %q names no generation", rec.ID, rec.Payload)
			}
			resp.G = g
		}
	case "scan", "topk":
		opt := vlc.SearchOptions{K: req.K, NProbe: 1 << 16}
		if req.Op == "topk" {
			opt.Rerank, opt.RerankFactor = payloadOriginals{ix}, 1<<12
		}
		var hits []vlc.Hit
		if hits, err = ix.Search(ctx, vector(req.Query), opt); err == nil {
			resp.Hits, err = toHits(hits)
		}
	case "len":
		resp.Len = ix.Len()
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	if err != nil {
		resp.Err, resp.Kind = err.Error(), kindOf(err)
	}
	return resp
}

func toHits(hits []vlc.Hit) ([]hit, error) {
	out := make([]hit, len(hits))
	for i, h := range hits {
		g, ok := generation(h.Payload)
		if !ok {
			return nil, fmt.Errorf("hit %s: payload %q names no generation", h.ID, h.Payload)
		}
		out[i] = hit{ID: h.ID, D: h.Distance, G: g}
	}
	return out, nil
}

// payloadOriginals re-ranks from the vectors the payloads name: the
// store's own record of what each id holds.
type payloadOriginals struct{ ix *vlc.Store }

func (o payloadOriginals) Vector(id string, dst []float32) ([]float32, error) {
	rec, err := o.ix.Get(id)
	if err != nil {
		return nil, err
	}
	g, ok := generation(rec.Payload)
	if !ok {
		return nil, fmt.Errorf("id %s: payload %q names no generation", id, rec.Payload)
	}
	return append(dst[:0], vector(g)...), nil
}
