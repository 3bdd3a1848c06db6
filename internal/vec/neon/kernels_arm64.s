	.text
	.file	"kernels_arm64.c"
	.globl	fast_scan_neon                  // -- Begin function fast_scan_neon
	.p2align	2
	.type	fast_scan_neon,@function
fast_scan_neon:                         // @fast_scan_neon
// %bb.0:
	cmp	x2, #1
	b.lt	.LBB0_4
// %bb.1:
	movi	v0.2d, #0000000000000000
	movi	v2.16b, #15
	movi	v4.2d, #0000000000000000
	movi	v3.2d, #0000000000000000
	movi	v1.2d, #0000000000000000
.LBB0_2:                                // =>This Inner Loop Header: Depth=1
	ldp	q5, q6, [x1], #32
	subs	x2, x2, #1
	and	v17.16b, v5.16b, v2.16b
	ushr	v5.16b, v5.16b, #4
	ldp	q7, q16, [x0], #32
	and	v18.16b, v6.16b, v2.16b
	ushr	v6.16b, v6.16b, #4
	tbl	v17.16b, { v7.16b }, v17.16b
	tbl	v7.16b, { v7.16b }, v18.16b
	tbl	v5.16b, { v16.16b }, v5.16b
	tbl	v6.16b, { v16.16b }, v6.16b
	uaddw	v0.8h, v0.8h, v17.8b
	uaddw2	v4.8h, v4.8h, v17.16b
	uaddw	v3.8h, v3.8h, v7.8b
	uaddw2	v1.8h, v1.8h, v7.16b
	uaddw	v0.8h, v0.8h, v5.8b
	uaddw2	v4.8h, v4.8h, v5.16b
	uaddw	v3.8h, v3.8h, v6.8b
	uaddw2	v1.8h, v1.8h, v6.16b
	b.ne	.LBB0_2
// %bb.3:
	stp	q0, q4, [x3]
	stp	q3, q1, [x3, #32]
	ret
.LBB0_4:
	movi	v1.2d, #0000000000000000
	movi	v3.2d, #0000000000000000
	movi	v4.2d, #0000000000000000
	movi	v0.2d, #0000000000000000
	stp	q0, q4, [x3]
	stp	q3, q1, [x3, #32]
	ret
.Lfunc_end0:
	.size	fast_scan_neon, .Lfunc_end0-fast_scan_neon
                                        // -- End function
	.globl	tables_neon                     // -- Begin function tables_neon
	.p2align	2
	.type	tables_neon,@function
tables_neon:                            // @tables_neon
// %bb.0:
	cmp	x1, #1
	b.lt	.LBB1_4
// %bb.1:
	ldp	q0, q1, [x4]
	movi	v3.2d, #0000000000000000
	mov	x8, xzr
	movi	v2.2d, #0000000000000000
	ldp	q4, q5, [x4, #32]
.LBB1_2:                                // =>This Inner Loop Header: Depth=1
	ldr	q6, [x0], #16
	add	x8, x8, #4
	cmp	x8, x1
	neg	v7.4s, v6.4s
	smax	v6.4s, v6.4s, v3.4s
	smax	v7.4s, v7.4s, v3.4s
	shl	v16.4s, v7.4s, #8
	add	v2.4s, v7.4s, v2.4s
	orr	v6.16b, v16.16b, v6.16b
	tbl	v16.16b, { v6.16b }, v0.16b
	tbl	v17.16b, { v6.16b }, v1.16b
	add	v16.16b, v17.16b, v16.16b
	tbl	v17.16b, { v6.16b }, v4.16b
	tbl	v6.16b, { v6.16b }, v5.16b
	add	v16.16b, v16.16b, v17.16b
	add	v6.16b, v16.16b, v6.16b
	str	q6, [x2], #16
	b.lt	.LBB1_2
// %bb.3:
	addv	s0, v2.4s
	fmov	w8, s0
	neg	w8, w8
	str	w8, [x3]
	ret
.LBB1_4:
	movi	v2.2d, #0000000000000000
	addv	s0, v2.4s
	fmov	w8, s0
	neg	w8, w8
	str	w8, [x3]
	ret
.Lfunc_end1:
	.size	tables_neon, .Lfunc_end1-tables_neon
                                        // -- End function
	.globl	levels_neon                     // -- Begin function levels_neon
	.p2align	2
	.type	levels_neon,@function
levels_neon:                            // @levels_neon
// %bb.0:
	cmp	x3, #1
	b.lt	.LBB2_18
// %bb.1:
	mov	w9, #-1
	mov	x8, xzr
	ldp	q0, q1, [x5]
	lsl	w9, w9, w4
	add	x10, x0, #16
	mvn	w12, w9
	lsl	x9, x4, #2
	movi	v3.2d, #0000000000000000
	add	x11, x2, #3
	movi	v4.4s, #1
	movi	v5.2d, #0000000000000000
	movi	v16.2d, #0000000000000000
	ldr	q2, [x5, #32]
	movi	v6.2d, #0000000000000000
	movi	v18.2d, #0000000000000000
	movi	v7.2d, #0000000000000000
	movi	v19.2d, #0000000000000000
	movi	v17.2d, #0000000000000000
	dup	v20.4s, w12
	dup	v21.4s, w4
	b	.LBB2_4
.LBB2_2:                                //   in Loop: Header=BB2_4 Depth=1
	fadd	v19.4s, v19.4s, v23.4s
	fadd	v17.4s, v17.4s, v22.4s
.LBB2_3:                                //   in Loop: Header=BB2_4 Depth=1
	add	x8, x8, #1
	add	x10, x10, #32
	add	x1, x1, #32
	add	x11, x11, x4
	cmp	x3, x8
	b.eq	.LBB2_17
.LBB2_4:                                // =>This Inner Loop Header: Depth=1
	cmp	x4, #7
	b.eq	.LBB2_8
// %bb.5:                               //   in Loop: Header=BB2_4 Depth=1
	cmp	x4, #3
	b.eq	.LBB2_9
// %bb.6:                               //   in Loop: Header=BB2_4 Depth=1
	cmp	x4, #1
	b.ne	.LBB2_10
// %bb.7:                               //   in Loop: Header=BB2_4 Depth=1
	ldurb	w12, [x11, #-3]
	b	.LBB2_11
.LBB2_8:                                //   in Loop: Header=BB2_4 Depth=1
	ldur	w12, [x11, #-3]
	ldrb	w13, [x11, #1]
	ldrb	w14, [x11, #2]
	ldrb	w15, [x11, #3]
	bfi	x12, x13, #32, #8
	bfi	x12, x14, #40, #8
	bfi	x12, x15, #48, #8
	b	.LBB2_11
.LBB2_9:                                //   in Loop: Header=BB2_4 Depth=1
	ldurh	w12, [x11, #-3]
	ldurb	w13, [x11, #-1]
	bfi	x12, x13, #16, #8
	b	.LBB2_11
.LBB2_10:                               //   in Loop: Header=BB2_4 Depth=1
	mov	x12, xzr
.LBB2_11:                               //   in Loop: Header=BB2_4 Depth=1
	ldrb	w13, [x1]
	lsr	x14, x12, x9
	dup	v23.4s, w12
	and	x12, x8, #0x3
	cmp	x12, #2
	dup	v22.4s, w13
	dup	v24.4s, w14
	ushl	v23.4s, v23.4s, v2.4s
	ushl	v25.4s, v22.4s, v0.4s
	ushl	v22.4s, v22.4s, v1.4s
	ushl	v24.4s, v24.4s, v2.4s
	and	v23.16b, v23.16b, v20.16b
	and	v25.16b, v25.16b, v4.16b
	and	v22.16b, v22.16b, v4.16b
	and	v24.16b, v24.16b, v20.16b
	ushl	v25.4s, v25.4s, v21.4s
	ushl	v22.4s, v22.4s, v21.4s
	orr	v23.16b, v23.16b, v25.16b
	orr	v22.16b, v24.16b, v22.16b
	ldp	q24, q25, [x10, #-16]
	ucvtf	v23.4s, v23.4s
	ucvtf	v22.4s, v22.4s
	fmul	v23.4s, v24.4s, v23.4s
	fmul	v22.4s, v25.4s, v22.4s
	b.eq	.LBB2_15
// %bb.12:                              //   in Loop: Header=BB2_4 Depth=1
	cmp	x12, #1
	b.eq	.LBB2_16
// %bb.13:                              //   in Loop: Header=BB2_4 Depth=1
	cbnz	x12, .LBB2_2
// %bb.14:                              //   in Loop: Header=BB2_4 Depth=1
	fadd	v3.4s, v3.4s, v23.4s
	fadd	v5.4s, v5.4s, v22.4s
	b	.LBB2_3
.LBB2_15:                               //   in Loop: Header=BB2_4 Depth=1
	fadd	v18.4s, v18.4s, v23.4s
	fadd	v7.4s, v7.4s, v22.4s
	b	.LBB2_3
.LBB2_16:                               //   in Loop: Header=BB2_4 Depth=1
	fadd	v16.4s, v16.4s, v23.4s
	fadd	v6.4s, v6.4s, v22.4s
	b	.LBB2_3
.LBB2_17:
	fadd	v0.4s, v16.4s, v3.4s
	fadd	v1.4s, v19.4s, v18.4s
	fadd	v2.4s, v6.4s, v5.4s
	fadd	v3.4s, v17.4s, v7.4s
	fadd	v0.4s, v1.4s, v0.4s
	fadd	v1.4s, v3.4s, v2.4s
	fadd	v0.4s, v1.4s, v0.4s
	ext	v1.16b, v0.16b, v0.16b, #8
	fadd	v0.2s, v0.2s, v1.2s
	faddp	s0, v0.2s
	ret
.LBB2_18:
	movi	v0.2d, #0000000000000000
	ext	v1.16b, v0.16b, v0.16b, #8
	fadd	v0.2s, v0.2s, v1.2s
	faddp	s0, v0.2s
	ret
.Lfunc_end2:
	.size	levels_neon, .Lfunc_end2-levels_neon
                                        // -- End function
	.globl	block_estimate_neon             // -- Begin function block_estimate_neon
	.p2align	2
	.type	block_estimate_neon,@function
block_estimate_neon:                    // @block_estimate_neon
// %bb.0:
	mov	x9, x2
	add	x10, x2, #8
	add	x11, x2, #12
	add	x12, x2, #16
	add	x13, x2, #20
	mov	x8, xzr
	ld1r	{ v0.4s }, [x9], #4
	ld1r	{ v1.4s }, [x10]
	add	x10, x2, #24
	ld1r	{ v2.4s }, [x11]
	add	x11, x2, #28
	ld1r	{ v3.4s }, [x12]
	ld1r	{ v4.4s }, [x13]
	ld1r	{ v5.4s }, [x10]
	add	x10, x1, #64
	ld1r	{ v6.4s }, [x9]
	add	x9, x1, #160
	ld1r	{ v7.4s }, [x11]
.LBB3_1:                                // =>This Inner Loop Header: Depth=1
	ldur	d16, [x9, #-32]
	ldr	d17, [x9], #4
	ldr	q18, [x0, x8]
	ushll	v16.8h, v16.8b, #0
	ushll	v17.8h, v17.8b, #0
	ucvtf	v18.4s, v18.4s
	ushll	v16.4s, v16.4h, #0
	ushll	v17.4s, v17.4h, #0
	fmul	v18.4s, v0.4s, v18.4s
	ucvtf	v16.4s, v16.4s
	ucvtf	v17.4s, v17.4s
	fadd	v18.4s, v6.4s, v18.4s
	fmul	v19.4s, v1.4s, v16.4s
	fmul	v17.4s, v2.4s, v17.4s
	fmul	v16.4s, v18.4s, v16.4s
	fmul	v19.4s, v19.4s, v19.4s
	fmul	v17.4s, v17.4s, v17.4s
	fadd	v17.4s, v19.4s, v17.4s
	ldur	d19, [x10, #-64]
	ldr	d20, [x10], #8
	fcvtl	v19.4s, v19.4h
	fsqrt	v17.4s, v17.4s
	fcvtl	v20.4s, v20.4h
	fmul	v18.4s, v4.4s, v19.4s
	fmul	v16.4s, v16.4s, v20.4s
	fadd	v18.4s, v3.4s, v18.4s
	fmul	v16.4s, v5.4s, v16.4s
	fmul	v17.4s, v20.4s, v17.4s
	fadd	v16.4s, v18.4s, v16.4s
	fmul	v17.4s, v7.4s, v17.4s
	str	q16, [x3, x8]
	str	q17, [x4, x8]
	add	x8, x8, #16
	cmp	x8, #128
	b.ne	.LBB3_1
// %bb.2:
	ret
.Lfunc_end3:
	.size	block_estimate_neon, .Lfunc_end3-block_estimate_neon
                                        // -- End function
	.ident	"Debian clang version 14.0.6"
	.section	".note.GNU-stack","",@progbits
	.addrsig
