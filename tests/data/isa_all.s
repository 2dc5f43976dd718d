# Every instruction form of the BPF ISA (RFC 9669 + v4) that LLVM 19 assembles; tests/test_isa.py
# decodes the assembled object and compares each instruction with a hand-written expectation.
	.text
	.globl f
	.type f,@function
f:
	r0 = 1
	r0 = -1
	w0 = 2
	r1 = r2
	w1 = w2
	r1 += r2
	r1 += 5
	w1 += w2
	w1 += 5
	r1 -= r2
	r1 *= r2
	r1 /= r2
	r1 /= 7
	r1 s/= r2
	r1 s/= 7
	w1 s/= w2
	r1 %= r2
	r1 s%= r2
	w1 s%= 3
	r1 |= r2
	r1 &= r2
	r1 <<= r2
	r1 >>= r2
	r1 s>>= r2
	r1 s>>= 3
	w1 s>>= 3
	r1 = -r1
	w1 = -w1
	r1 ^= r2
	r1 = (s8)r2
	r1 = (s16)r2
	r1 = (s32)r2
	w1 = (s8)w2
	w1 = (s16)w2
	r1 = be16 r1
	r1 = be32 r1
	r1 = be64 r1
	r1 = le16 r1
	r1 = le32 r1
	r1 = le64 r1
	r1 = bswap16 r1
	r1 = bswap32 r1
	r1 = bswap64 r1
	r1 = *(u8 *)(r2 + 1)
	r1 = *(u16 *)(r2 - 2)
	r1 = *(u32 *)(r2 + 4)
	r1 = *(u64 *)(r2 + 8)
	r1 = *(s8 *)(r2 + 1)
	r1 = *(s16 *)(r2 + 2)
	r1 = *(s32 *)(r2 + 4)
	*(u8 *)(r10 - 1) = r1
	*(u16 *)(r10 - 2) = r1
	*(u32 *)(r10 - 4) = r1
	*(u64 *)(r10 - 8) = r1
	*(u8 *)(r10 - 1) = 3
	*(u16 *)(r10 - 2) = 3
	*(u32 *)(r10 - 4) = 3
	*(u64 *)(r10 - 8) = 3
	lock *(u32 *)(r1 + 0) += w2
	lock *(u64 *)(r1 + 0) += r2
	lock *(u64 *)(r1 + 0) |= r2
	lock *(u64 *)(r1 + 0) &= r2
	lock *(u64 *)(r1 + 0) ^= r2
	r2 = atomic_fetch_add((u64 *)(r1 + 0), r2)
	r2 = atomic_fetch_or((u64 *)(r1 + 0), r2)
	r2 = atomic_fetch_and((u64 *)(r1 + 0), r2)
	r2 = atomic_fetch_xor((u64 *)(r1 + 0), r2)
	w2 = atomic_fetch_add((u32 *)(r1 + 0), w2)
	r2 = xchg_64(r1 + 0, r2)
	w2 = xchg32_32(r1 + 0, w2)
	r0 = cmpxchg_64(r1 + 0, r0, r2)
	w0 = cmpxchg32_32(r1 + 0, w0, w2)
	r1 = 0x123456789 ll
	r0 = *(u8 *)skb[3]
	r0 = *(u16 *)skb[r1]
	if r1 == r2 goto +1
	if r1 == 3 goto -1
	if w1 == w2 goto +1
	if w1 == 3 goto +1
	if r1 != r2 goto +1
	if r1 > r2 goto +1
	if r1 >= r2 goto +1
	if r1 < r2 goto +1
	if r1 <= r2 goto +1
	if r1 s> r2 goto +1
	if r1 s>= r2 goto +1
	if r1 s< r2 goto +1
	if r1 s<= r2 goto +1
	if r1 & r2 goto +1
	if w1 & 4 goto +1
	if w1 s< -4 goto +1
	goto +0
	gotol +0
	call 1
	call 12
	exit
