package vlc

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/vlc-embed/vlc/index"
)

// Build trains an index on docs held in memory, writes it to path
// atomically (as Compress does a file: on any backend, normalised for the
// cosine metric, trained on float16) and opens it. Documents without an
// ID are named by their position ("0", "1", ...); ids must be unique.
// Options.Dim, IDs, Payloads, Start and End are Compress's and must be
// left zero; AnchorsFrom encodes the documents under a model, as it does
// a file. A store at path (an index that took writes) is replaced only
// with Options.Replace.
func Build(ctx context.Context, path string, docs []Document, opt Options) (*Index, error) {
	start := time.Now()
	switch {
	case opt.IDs != nil || opt.Payloads != nil:
		return nil, &OptionError{Fields: []string{"IDs", "Payloads"}, Reason: "Build takes the ids and payloads from its documents"}
	case opt.Start != 0 || opt.End != 0:
		return nil, &OptionError{Fields: []string{"Start", "End"}, Reason: "Build takes every document; Start and End choose rows of Compress's input"}
	case len(docs) == 0:
		return nil, fmt.Errorf("%w: no documents to build from", index.ErrArgument)
	}
	metric, _ := index.ParseMetric(opt.Metric) // checked by prepare below
	if err := checkDocs(docs, len(docs[0].Vector), metric); err != nil {
		return nil, err
	}
	if opt.Dim != 0 && opt.Dim != len(docs[0].Vector) {
		return nil, fmt.Errorf("%w: documents have dimension %d, Options.Dim says %d", index.ErrDim, len(docs[0].Vector), opt.Dim)
	}
	opt, log, err := opt.prepare(path)
	if err != nil {
		return nil, err
	}
	src := source{name: "documents", rows: docRows(docs), checkFinite: func() error { return nil }}
	for i, d := range docs {
		if d.ID != "" && src.keys == nil {
			src.keys = make([]string, len(docs))
			for j := range i {
				src.keys[j] = strconv.Itoa(j)
			}
		}
		if src.keys != nil {
			src.keys[i] = d.ID
			if d.ID == "" {
				src.keys[i] = strconv.Itoa(i)
			}
		}
		if d.Payload != nil && src.payloads == nil {
			src.payloads = make([][]byte, len(docs))
		}
		if src.payloads != nil {
			src.payloads[i] = d.Payload
		}
	}
	release, err := claimOutput(ctx, path, opt.Replace)
	if err != nil {
		return nil, err
	}
	_, err = compress(ctx, src, path, opt, log, start)
	release(err == nil)
	if err != nil {
		return nil, err
	}
	return Open(path)
}

// docRows presents the documents' vectors as Rows.
type docRows []Document

func (r docRows) Len() int                           { return len(r) }
func (r docRows) Dim() int                           { return len(r[0].Vector) }
func (r docRows) Row(i int, dst []float32) []float32 { return append(dst[:0], r[i].Vector...) }
