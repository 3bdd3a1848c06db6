package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/serve"
)

// textID returns an id as the text outputs print it (search hits, get,
// the ids add gave): as it is, unless a reader of lines and tabs would
// trip on it, or could not tell it from a quoted one. An id holding a
// control character (tab, newline, ...), a character that does not
// print, bytes that are not UTF-8, a double quote or a backslash is
// printed as strconv.Quote writes it, so a field that starts with a
// double quote is always quoted (strconv.Unquote reads it back).
func textID(id string) string {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			if q := strconv.Quote(id); q[1:len(q)-1] != id {
				return q
			}
			return id
		}
	}
	return id
}

// textPayload returns a payload as the text outputs print it: JSON on
// one line (compacted: JSON has tabs and newlines only as white space),
// or, for a payload that is not JSON, quoted as textID quotes.
func textPayload(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	if json.Valid(p) {
		var b bytes.Buffer
		if json.Compact(&b, p) == nil {
			return b.String()
		}
	}
	return strconv.Quote(string(p))
}

// hitWriter prints search results, query after query: as tab-separated
// lines, one a hit (QUERY RANK ID DISTANCE [PAYLOAD]), or with -json as
// JSON Lines, one object a query, its hits those of vlc serve's search.
type hitWriter struct {
	w        *bufio.Writer
	json     bool
	payloads bool
}

func newHitWriter(w io.Writer, asJSON, payloads bool) *hitWriter {
	return &hitWriter{w: bufio.NewWriter(w), json: asJSON, payloads: payloads}
}

// queryHits is one line of -json.
type queryHits struct {
	Query int             `json:"query"`
	Hits  []serve.HitBody `json:"hits"`
}

// query prints the hits of query number q.
func (h *hitWriter) query(q int, hits []vlc.Hit) error {
	if h.json {
		line := queryHits{Query: q, Hits: make([]serve.HitBody, len(hits))}
		for i, hit := range hits {
			line.Hits[i] = serve.HitBody{ID: hit.ID, Distance: hit.Distance}
			if h.payloads && len(hit.Payload) > 0 {
				if json.Valid(hit.Payload) {
					line.Hits[i].Payload = hit.Payload
				} else {
					line.Hits[i].PayloadBase64 = hit.Payload
				}
			}
		}
		enc := json.NewEncoder(h.w)
		enc.SetEscapeHTML(false)
		return enc.Encode(line)
	}
	for r, hit := range hits {
		if h.payloads {
			fmt.Fprintf(h.w, "%d\t%d\t%s\t%g\t%s\n", q, r+1, textID(hit.ID), hit.Distance, textPayload(hit.Payload))
		} else {
			fmt.Fprintf(h.w, "%d\t%d\t%s\t%g\n", q, r+1, textID(hit.ID), hit.Distance)
		}
	}
	return nil
}

// flush writes out what is buffered.
func (h *hitWriter) flush() error { return h.w.Flush() }
