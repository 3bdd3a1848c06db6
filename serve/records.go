package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	vlc "github.com/vlc-embed/vlc"
)

// filterOf is the library's filter of a request's "where" (the JSON
// filter syntax) or "filter" (ids, or equality of fields); nil for
// neither.
func filterOf(where json.RawMessage, legacy *Filter) (vlc.Filter, error) {
	if bytes.Equal(bytes.TrimSpace(where), []byte("null")) {
		where = nil
	}
	switch {
	case where != nil && legacy != nil:
		return nil, errors.New(`give "where" or "filter", not both`)
	case where != nil:
		f, err := vlc.ParseFilter(where)
		if err != nil {
			return nil, fmt.Errorf("where: %w", err)
		}
		return f, nil
	case legacy != nil:
		return legacy.build()
	}
	return nil, nil
}

// documentBody is a record as get and list answer it.
func documentBody(rec vlc.Record) DocumentBody {
	b := DocumentBody{ID: rec.ID, Vector: rec.Vector}
	b.Payload, b.PayloadBase64 = payloadBody(rec.Payload)
	return b
}

// CountRequest counts the documents a filter allows (all of them
// without one).
type CountRequest struct {
	Where  json.RawMessage `json:"where,omitempty"`
	Filter *Filter         `json:"filter,omitempty"`
}

func (s *Server) count(w http.ResponseWriter, r *http.Request) (int, error) {
	ix, _, err := s.index(r)
	if err != nil {
		return 0, err
	}
	var req CountRequest
	if st, err := decodeOptional(r, &req); err != nil {
		return st, err
	}
	f, err := filterOf(req.Where, req.Filter)
	if err != nil {
		return http.StatusBadRequest, err
	}
	n, err := ix.Count(f)
	if err != nil {
		return 0, err
	}
	return reply(w, struct {
		Count int `json:"count"`
	}{n})
}

// defaultListLimit is a page's documents when a list gives no limit (the
// library's default).
const defaultListLimit = 100

// ListRequest asks for a page of documents in byte order of their ids:
// those after the id After ("" for the first page), at most Limit
// (default 100, at most the server's batch limit), those a filter allows
// (all without one), with their vectors when Vectors is true.
type ListRequest struct {
	After   string          `json:"after,omitempty"`
	Limit   int             `json:"limit,omitempty"`
	Where   json.RawMessage `json:"where,omitempty"`
	Filter  *Filter         `json:"filter,omitempty"`
	Vectors bool            `json:"vectors,omitempty"`
}

// ListResponse is a page of documents; Next is the After of the next
// page, "" (left out) after the last.
type ListResponse struct {
	Documents []DocumentBody `json:"documents"`
	Next      string         `json:"next,omitempty"`
}

func (s *Server) listRecords(w http.ResponseWriter, r *http.Request) (int, error) {
	ix, _, err := s.index(r)
	if err != nil {
		return 0, err
	}
	var req ListRequest
	if st, err := decodeOptional(r, &req); err != nil {
		return st, err
	}
	if req.Limit < 0 || req.Limit > s.limits.Batch {
		return http.StatusBadRequest, fmt.Errorf("limit %d: must be 1 to %d (the limit); leave it out for %d", req.Limit, s.limits.Batch, min(defaultListLimit, s.limits.Batch))
	}
	if req.Limit == 0 {
		req.Limit = min(defaultListLimit, s.limits.Batch)
	}
	f, err := filterOf(req.Where, req.Filter)
	if err != nil {
		return http.StatusBadRequest, err
	}
	page, err := ix.List(r.Context(), vlc.ListOptions{After: req.After, Limit: req.Limit, Filter: f, Vectors: req.Vectors})
	if err != nil {
		return 0, err
	}
	out := ListResponse{Documents: make([]DocumentBody, len(page.Records)), Next: page.Next}
	for i, rec := range page.Records {
		out.Documents[i] = documentBody(rec)
	}
	return reply(w, out)
}

// PayloadsRequest replaces the payloads of documents the index holds,
// without encoding their vectors again: each is an id with "payload" or
// "payload_base64", or neither to remove its payload. An id the index
// does not hold is a 404 naming it, and then nothing changes.
type PayloadsRequest struct {
	Documents []PayloadBody `json:"documents"`
}

// PayloadBody is one document's new payload.
type PayloadBody struct {
	ID            string          `json:"id"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 []byte          `json:"payload_base64,omitempty"`
}

func (s *Server) setPayloads(w http.ResponseWriter, r *http.Request) (int, error) {
	ix, name, err := s.index(r)
	if err != nil {
		return 0, err
	}
	if err := s.readOnly(name); err != nil {
		return http.StatusConflict, err
	}
	var req PayloadsRequest
	if st, err := decode(r, &req); err != nil {
		return st, err
	}
	switch {
	case len(req.Documents) == 0:
		return http.StatusBadRequest, errors.New(`no "documents" to update`)
	case len(req.Documents) > s.limits.Batch:
		return http.StatusBadRequest, fmt.Errorf("%d documents in one payload update, over the limit of %d", len(req.Documents), s.limits.Batch)
	}
	recs := make([]vlc.Record, len(req.Documents))
	first := make(map[string]int, len(req.Documents))
	for i, d := range req.Documents {
		if d.ID == "" {
			return http.StatusBadRequest, fmt.Errorf("document %d: no id", i)
		}
		if j, dup := first[d.ID]; dup {
			return http.StatusBadRequest, fmt.Errorf("documents %d and %d have the same id %q", j, i, d.ID)
		}
		first[d.ID] = i
		payload, err := DocumentBody{Payload: d.Payload, PayloadBase64: d.PayloadBase64}.payload(i)
		if err != nil {
			return http.StatusBadRequest, err
		}
		if bytes.Equal(payload, []byte("null")) {
			payload = nil // JSON null removes it too
		}
		recs[i] = vlc.Record{ID: d.ID, Payload: payload}
	}
	if err := ix.SetPayloads(context.WithoutCancel(r.Context()), recs); err != nil {
		return 0, err
	}
	s.wrote(name)
	return reply(w, struct {
		Updated int `json:"updated"`
	}{len(recs)})
}
