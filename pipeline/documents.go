package pipeline

import (
	"fmt"
	"math"
	"strconv"

	"github.com/vlc-embed/vlc/index"
)

// Document is a vector with the caller's id and an optional payload.
type Document struct {
	// ID names the vector, unique in the index, at most index.MaxKeyBytes. ""
	// lets the index pick the next free number (in decimal). Ids are
	// strings because the ids RAG pipelines carry (document and chunk
	// names, UUIDs, LangChainGo's and chromem-go's ids) are strings; a
	// number is its decimal string.
	ID      string
	Vector  []float32
	Payload []byte // returned with hits and by Get; at most index.MaxPayloadBytes
}

// CheckDocuments refuses documents Add or Build cannot index under metric,
// naming the first bad one: cosine normalises every finite vector but
// the zero vector (ErrZeroVector), l2 and ip need values within float16
// and a vector zero or not too small for float32 distances (checkScale).
func CheckDocuments(docs []Document, d int, metric index.Metric) error {
	for i, doc := range docs {
		name := fmt.Sprintf("document %d", i)
		if doc.ID != "" {
			name = fmt.Sprintf("document %d (%q)", i, doc.ID)
			if err := index.CheckKey(doc.ID); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if len(doc.Vector) != d {
			return fmt.Errorf("%s: %w: %d values, the index has dimension %d", name, index.ErrDim, len(doc.Vector), d)
		}
		for j, v := range doc.Vector {
			switch {
			case math.IsNaN(float64(v)) || math.IsInf(float64(v), 0):
				return fmt.Errorf("%s: %w: value %d is %v", name, index.ErrArgument, j, v)
			case math.Abs(float64(v)) > 65504 && metric != index.Cosine:
				return fmt.Errorf("%s: %w: value %d is %g (|x| <= 65504)", name, ErrRange, j, v)
			}
		}
		if metric == index.Cosine && isZeroVector(doc.Vector) {
			return fmt.Errorf("%s: %w: every value is 0; %s", name, ErrZeroVector, zeroFix)
		}
		if why := checkScale(doc.Vector); why != "" && metric != index.Cosine {
			return fmt.Errorf("%s: %w: %s", name, ErrUnderflow, why)
		}
		if len(doc.Payload) > index.MaxPayloadBytes {
			return fmt.Errorf("%s: %w: %d bytes (at most %d)", name, index.ErrPayload, len(doc.Payload), index.MaxPayloadBytes)
		}
	}
	return nil
}

// docRows presents the documents' vectors as Rows.
type docRows []Document

func (r docRows) Len() int                           { return len(r) }
func (r docRows) Dim() int                           { return len(r[0].Vector) }
func (r docRows) Row(i int, dst []float32) []float32 { return append(dst[:0], r[i].Vector...) }

// DocumentSource presents docs, checked by CheckDocuments, as a Source
// named name: a document without an ID is named by its position ("0",
// "1", ...), and none having one leaves the rows named by number.
func DocumentSource(name string, docs []Document) Source {
	src := Source{Name: name, Rows: docRows(docs)}
	for i, d := range docs {
		if d.ID != "" && src.Keys == nil {
			src.Keys = make([]string, len(docs))
			for j := range i {
				src.Keys[j] = strconv.Itoa(j)
			}
		}
		if src.Keys != nil {
			src.Keys[i] = d.ID
			if d.ID == "" {
				src.Keys[i] = strconv.Itoa(i)
			}
		}
		if d.Payload != nil && src.Payloads == nil {
			src.Payloads = make([][]byte, len(docs))
		}
		if src.Payloads != nil {
			src.Payloads[i] = d.Payload
		}
	}
	return src
}
