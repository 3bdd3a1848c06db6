package anneal_test

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
)

// Learn three anchors for points in three clusters, on the CPU backend
// (training runs the same way on a GPU backend from device.Open).
func ExampleTrain() {
	var data []uint16
	for _, c := range [][2]float32{{0, 0}, {10, 0}, {0, 10}} {
		for _, dx := range []float32{-0.5, 0, 0.5} {
			for _, dy := range []float32{-0.5, 0, 0.5} {
				data = append(data, f16.FromFloat32(c[0]+dx), f16.FromFloat32(c[1]+dy))
			}
		}
	}
	pts := device.Points{Data: data, N: len(data) / 2, Dim: 2}
	model, err := anneal.Train(context.Background(), cpu.New(), pts, anneal.Config{M: 3, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	round := func(v float32) float64 { return math.Round(float64(v)*10)/10 + 0 } // +0: no "-0.0"
	var anchors []string
	for a := range model.M {
		anchors = append(anchors, fmt.Sprintf("(%.1f, %.1f) with %d points", round(model.Anchors[2*a]), round(model.Anchors[2*a+1]), model.Counts[a]))
	}
	slices.Sort(anchors)
	for _, a := range anchors {
		fmt.Println(a)
	}
	fmt.Printf("energy %.3f, converged %v\n", model.Energy, model.Converged)
	// Output:
	// (0.0, 0.0) with 9 points
	// (0.0, 10.0) with 9 points
	// (10.0, 0.0) with 9 points
	// energy 0.333, converged true
}
