// NEON kernels of internal/vec for arm64, transpiled to Go assembly by
// GoAT (github.com/gorse-io/goat): see gen.sh. Each keeps the order of
// operations of its Go reference in fastscan.go and is compiled with
// -ffp-contract=off, so that no multiply and add fuse and the results
// agree with the reference to the last bit.
#include <arm_neon.h>

// fast_scan_neon sets sums[v], v < 32, to the sum over pairs <= 128 chunks
// p of lut[32p + (signs[32p+v] & 15)] + lut[32p + 16 + (signs[32p+v] >> 4)].
void fast_scan_neon(unsigned char *lut, unsigned char *signs, long pairs, unsigned short *sums) {
	uint16x8_t a0 = vdupq_n_u16(0), a1 = a0, a2 = a0, a3 = a0;
	uint8x16_t mask = vdupq_n_u8(15);
	for (long p = 0; p < pairs; p++) {
		uint8x16_t lo = vld1q_u8(lut), hi = vld1q_u8(lut + 16);
		uint8x16_t s0 = vld1q_u8(signs), s1 = vld1q_u8(signs + 16);
		uint8x16_t r0 = vqtbl1q_u8(lo, vandq_u8(s0, mask));
		uint8x16_t r1 = vqtbl1q_u8(lo, vandq_u8(s1, mask));
		uint8x16_t t0 = vqtbl1q_u8(hi, vshrq_n_u8(s0, 4));
		uint8x16_t t1 = vqtbl1q_u8(hi, vshrq_n_u8(s1, 4));
		a0 = vaddw_u8(a0, vget_low_u8(r0));
		a1 = vaddw_high_u8(a1, r0);
		a2 = vaddw_u8(a2, vget_low_u8(r1));
		a3 = vaddw_high_u8(a3, r1);
		a0 = vaddw_u8(a0, vget_low_u8(t0));
		a1 = vaddw_high_u8(a1, t0);
		a2 = vaddw_u8(a2, vget_low_u8(t1));
		a3 = vaddw_high_u8(a3, t1);
		lut += 32;
		signs += 32;
	}
	vst1q_u16(sums, a0);
	vst1q_u16(sums + 8, a1);
	vst1q_u16(sums + 16, a2);
	vst1q_u16(sums + 24, a3);
}

// tables_neon writes 16 table bytes per 4 values of k (n a multiple of 4),
// entry v the sum over i of max(k, 0) where bit i of v is set, else
// max(-k, 0), and stores minus the sum of max(-k, 0) in *off. pick holds
// four 16-byte shuffles, pick[16i+v] = 4i if bit i of v is set, else 4i+1
// (passed in: GoAT does not carry C constant data).
void tables_neon(int *k, long n, unsigned char *lut, int *off, unsigned char *pick) {
	uint8x16_t p0 = vld1q_u8(pick), p1 = vld1q_u8(pick + 16), p2 = vld1q_u8(pick + 32), p3 = vld1q_u8(pick + 48);
	int32x4_t zero = vdupq_n_s32(0), negs = zero;
	for (long j = 0; j < n; j += 4) {
		int32x4_t x = vld1q_s32(k + j);
		int32x4_t pos = vmaxq_s32(x, zero), neg = vmaxq_s32(vnegq_s32(x), zero);
		negs = vaddq_s32(negs, neg);
		uint8x16_t b = vreinterpretq_u8_s32(vorrq_s32(pos, vshlq_n_s32(neg, 8)));
		uint8x16_t t = vqtbl1q_u8(b, p0);
		t = vaddq_u8(t, vqtbl1q_u8(b, p1));
		t = vaddq_u8(t, vqtbl1q_u8(b, p2));
		t = vaddq_u8(t, vqtbl1q_u8(b, p3));
		vst1q_u8(lut + 4 * j, t);
	}
	*off = -vaddvq_s32(negs);
}

// levels_neon stores in *out sum q[j] * level j over j < 8*chunks, as dotLevelsGo
// does for w low bits (w in 0, 1, 3, 7): value 8p+i to accumulator
// 8(p%4)+i, folded as foldLanes. shifts holds 0, -1, .., -7 (the sign
// bits' right shifts) then 0, -w, -2w, -3w (the low bits'). (A pointer,
// not a return value: GoAT sizes float results as 8 bytes.)
void levels_neon(float *q, unsigned char *signs, unsigned char *low, long chunks, long w, int *shifts, float *out) {
	float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
	int32x4_t sh0 = vld1q_s32(shifts), sh1 = vld1q_s32(shifts + 4), lsh = vld1q_s32(shifts + 8);
	uint32x4_t one = vdupq_n_u32(1), lmask = vdupq_n_u32((1u << w) - 1);
	int32x4_t wv = vdupq_n_s32((int)w);
	for (long p = 0; p < chunks; p++) {
		uint32x4_t sb = vdupq_n_u32(signs[32 * p]);
		uint32x4_t l0 = vshlq_u32(vandq_u32(vshlq_u32(sb, sh0), one), wv);
		uint32x4_t l1 = vshlq_u32(vandq_u32(vshlq_u32(sb, sh1), one), wv);
		unsigned long bits = 0;
		unsigned char *b = low + w * p;
		switch (w) {
		case 1:
			bits = b[0];
			break;
		case 3:
			bits = b[0] | (unsigned long)b[1] << 8 | (unsigned long)b[2] << 16;
			break;
		case 7:
			bits = b[0] | (unsigned long)b[1] << 8 | (unsigned long)b[2] << 16 | (unsigned long)b[3] << 24 |
			       (unsigned long)b[4] << 32 | (unsigned long)b[5] << 40 | (unsigned long)b[6] << 48;
			break;
		}
		uint32x4_t b0 = vdupq_n_u32((unsigned)bits), b1 = vdupq_n_u32((unsigned)(bits >> (4 * w)));
		l0 = vorrq_u32(l0, vandq_u32(vshlq_u32(b0, lsh), lmask));
		l1 = vorrq_u32(l1, vandq_u32(vshlq_u32(b1, lsh), lmask));
		float32x4_t x0 = vmulq_f32(vld1q_f32(q + 8 * p), vcvtq_f32_u32(l0));
		float32x4_t x1 = vmulq_f32(vld1q_f32(q + 8 * p + 4), vcvtq_f32_u32(l1));
		switch (p % 4) {
		case 0:
			a0 = vaddq_f32(a0, x0);
			a1 = vaddq_f32(a1, x1);
			break;
		case 1:
			a2 = vaddq_f32(a2, x0);
			a3 = vaddq_f32(a3, x1);
			break;
		case 2:
			a4 = vaddq_f32(a4, x0);
			a5 = vaddq_f32(a5, x1);
			break;
		default:
			a6 = vaddq_f32(a6, x0);
			a7 = vaddq_f32(a7, x1);
		}
	}
	float32x4_t lo = vaddq_f32(vaddq_f32(a0, a2), vaddq_f32(a4, a6));
	float32x4_t hi = vaddq_f32(vaddq_f32(a1, a3), vaddq_f32(a5, a7));
	float32x4_t h = vaddq_f32(lo, hi);
	*out = (vgetq_lane_f32(h, 0) + vgetq_lane_f32(h, 2)) + (vgetq_lane_f32(h, 1) + vgetq_lane_f32(h, 3));
}

// block_estimate_neon computes est and bound for 32 entries as
// blockEstimateGo does.
void block_estimate_neon(unsigned int *sums, unsigned char *scal, float *c, float *est, float *bound) {
	float32x4_t a = vdupq_n_f32(c[0]), b0 = vdupq_n_f32(c[1]), ka = vdupq_n_f32(c[2]), ke = vdupq_n_f32(c[3]);
	float32x4_t c0 = vdupq_n_f32(c[4]), c1 = vdupq_n_f32(c[5]), c2 = vdupq_n_f32(c[6]), c2abs = vdupq_n_f32(c[7]);
	for (int g = 0; g < 8; g++) {
		float32x4_t qs = vaddq_f32(vmulq_f32(a, vcvtq_f32_u32(vld1q_u32(sums + 4 * g))), b0);
		// Four bytes each, loaded as one 32-bit lane: an 8-byte load would
		// read past the scalars at the end of the last block.
		uint8x8_t k8 = vreinterpret_u8_u32(vld1_dup_u32((const unsigned int *)(scal + 128 + 4 * g)));
		uint8x8_t e8 = vreinterpret_u8_u32(vld1_dup_u32((const unsigned int *)(scal + 160 + 4 * g)));
		uint32x4_t kb = vmovl_u16(vget_low_u16(vmovl_u8(k8)));
		uint32x4_t eb = vmovl_u16(vget_low_u16(vmovl_u8(e8)));
		float32x4_t kappa = vcvtq_f32_u32(kb), eps = vcvtq_f32_u32(eb);
		float32x4_t eu = vmulq_f32(kappa, qs);
		float32x4_t n = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((unsigned short *)(scal + 8 * g))));
		float32x4_t bt = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((unsigned short *)(scal + 64 + 8 * g))));
		float32x4_t e = vaddq_f32(vaddq_f32(vmulq_f32(c1, n), c0), vmulq_f32(c2, vmulq_f32(bt, eu)));
		vst1q_f32(est + 4 * g, e);
		float32x4_t x = vmulq_f32(ka, kappa), y = vmulq_f32(ke, eps);
		float32x4_t r = vsqrtq_f32(vaddq_f32(vmulq_f32(x, x), vmulq_f32(y, y)));
		vst1q_f32(bound + 4 * g, vmulq_f32(c2abs, vmulq_f32(bt, r)));
	}
}
