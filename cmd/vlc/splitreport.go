package main

import (
	"fmt"
	"io"
	"time"

	"github.com/vlc-embed/vlc/device"
)

// splitFigures are a split point set's figures over some passes (the
// difference of two SplitReports), per pass.
type splitFigures struct {
	Passes int `json:"passes"`
	// ReduceMs is each share's assign and reduce, ms a pass, in share order.
	ReduceMs []float64 `json:"reduce_ms_per_pass"`
	Rows     []int     `json:"rows"`
	Devices  []string  `json:"devices"`
	// CombineMs: from the end of the shares' reduces to the end of the
	// update, ms a pass; ExchangeMs the longest share's exchange in it.
	CombineMs     float64 `json:"combine_ms_per_pass"`
	ExchangeMs    float64 `json:"exchange_ms_per_pass"`
	ExchangeBytes int64   `json:"exchange_bytes_per_pass"`
	ExchangePath  string  `json:"exchange_path,omitempty"`
}

// splitDelta is what the set did between reports a and b.
func splitDelta(a, b device.SplitReport) splitFigures {
	f := splitFigures{Passes: b.Passes - a.Passes, ExchangePath: b.ExchangePath}
	if f.Passes < 1 || len(a.Shares) != len(b.Shares) {
		return f
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(f.Passes) }
	var ex time.Duration
	for i, s := range b.Shares {
		f.ReduceMs = append(f.ReduceMs, per(s.Reduce-a.Shares[i].Reduce))
		f.Rows = append(f.Rows, s.Rows)
		f.Devices = append(f.Devices, s.Device)
		ex = max(ex, s.Exchange-a.Shares[i].Exchange)
	}
	f.CombineMs, f.ExchangeMs = per(b.Combine-a.Combine), per(ex)
	f.ExchangeBytes = (b.ExchangeBytes - a.ExchangeBytes) / int64(f.Passes)
	return f
}

// print writes the figures, one line a device and one for the exchange,
// each after indent.
func (f splitFigures) print(w io.Writer, indent string) {
	if f.Passes < 1 {
		return
	}
	for i := range f.ReduceMs {
		fmt.Fprintf(w, "%sshare %d (%s, %d rows): assign + reduce %.3f ms a pass\n", indent, i, f.Devices[i], f.Rows[i], f.ReduceMs[i])
	}
	fmt.Fprintf(w, "%scombine (fold, exchange, update): %.3f ms a pass", indent, f.CombineMs)
	if f.ExchangePath != "" {
		rate := ""
		if f.ExchangeMs > 0 {
			rate = fmt.Sprintf(", %.1f GB/s over all devices", float64(f.ExchangeBytes)/(f.ExchangeMs*1e-3)/1e9)
		}
		fmt.Fprintf(w, "; exchange %.3f ms, %.1f MB between devices (%s%s)", f.ExchangeMs, float64(f.ExchangeBytes)/1e6, f.ExchangePath, rate)
	}
	fmt.Fprintln(w)
}
