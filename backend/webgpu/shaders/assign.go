package shaders

import (
	"fmt"
	"strings"
)

// assignParts writes the unrolled pieces of assign.wgsl for tile t: every
// accumulator a named vec4 and every index a constant, so that no shader
// compiler needs to unroll a loop to keep them in registers.
//
// Invocation (tx, ty) holds RM points and RN anchors in groups of four:
// point group g is points g*(TM/(RM/4)) + 4*ty + c, anchor group h is
// anchors h*(TN/(RN/4)) + 4*tx + c (c < 4), so that neighbouring
// invocations read neighbouring vec4s of workgroup memory.
func assignParts(t AssignTile) map[string]string {
	rm4, rn4 := t.RM/4, t.RN/4
	comp := "xyzw"
	var init, decl, zero, fma, argmin, cand strings.Builder
	for i := range t.RM {
		fmt.Fprintf(&init, "    bv[%d] = 0.0;\n    bi[%d] = NONE;\n", i, i)
	}
	for i := range t.RM {
		for h := range rn4 {
			fmt.Fprintf(&decl, "    var acc%d_%d = vec4<f32>(0.0);\n", i, h)
			fmt.Fprintf(&zero, "        acc%d_%d = vec4<f32>(0.0);\n", i, h)
		}
	}
	for g := range rm4 {
		fmt.Fprintf(&fma, "                let x%d = xs[k * (TM / 4u) + %du + ty];\n", g, g*(t.TM/4/rm4))
	}
	for h := range rn4 {
		fmt.Fprintf(&fma, "                let a%d = as_[k * (TN / 4u) + %du + tx];\n", h, h*(t.TN/4/rn4))
	}
	for i := range t.RM {
		for h := range rn4 {
			fmt.Fprintf(&fma, "                acc%d_%d = fma(vec4<f32>(x%d.%c), a%d, acc%d_%d);\n", i, h, i/4, comp[i%4], h, i, h)
		}
	}
	// Anchors in increasing order: a strict < keeps the lowest index.
	for h := range rn4 {
		for c := range 4 {
			fmt.Fprintf(&argmin, "        {\n            let a = at * TN + %du + 4u * tx + %du;\n", h*(t.TN/rn4), c)
			argmin.WriteString("            if (a < P.m) {\n                let an = anorm[a];\n")
			for i := range t.RM {
				fmt.Fprintf(&argmin, "                let v%d = an - 2.0 * acc%d_%d.%c;\n", i, i, h, comp[c])
				fmt.Fprintf(&argmin, "                if (bi[%d] == NONE || v%d < bv[%d]) { bv[%d] = v%d; bi[%d] = a; }\n", i, i, i, i, i, i)
			}
			argmin.WriteString("            }\n        }\n")
		}
	}
	for i := range t.RM {
		fmt.Fprintf(&cand, "    {\n        let s = (%du + 4u * ty + %du) * TX + tx;\n", (i/4)*(t.TM/rm4), i%4)
		fmt.Fprintf(&cand, "        xs[s / 4u][s %% 4u] = bv[%d];\n        as_[s / 4u][s %% 4u] = bitcast<f32>(bi[%d]);\n    }\n", i, i)
	}
	return map[string]string{
		"BEST_INIT": init.String(), "ACC_DECL": decl.String(), "ACC_ZERO": zero.String(), "FMA": fma.String(),
		"ARGMIN": argmin.String(), "CANDIDATES": cand.String(),
	}
}
