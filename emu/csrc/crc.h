/* emu/csrc/crc.h: CRC-32, zlib's, by table and by carry-less multiplication (part of emu/_core.c, one translation unit) */
#ifndef EMU_CSRC_CRC_H
#define EMU_CSRC_CRC_H

/* -- CRC-32 (IEEE 802.3, zlib's crc32: reflected 0xEDB88320, init and final xor 0xFFFFFFFF), by
 * slices of 8 bytes: the frames' FCS and its check on receipt, on the bytes in place (no copies) */
static uint32_t crc_t[8][256];

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_t[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            crc_t[k][n] = crc_t[0][crc_t[k - 1][n] & 0xFF] ^ (crc_t[k - 1][n] >> 8);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_CLMUL_CRC 1
/* the end of a fold (crc32_clmul, crc32_fold8): the 128-bit state ``x1`` on over the ``len`` more
 * bytes at ``buf`` (a multiple of 16) by ``x0`` (k3k4), then to 64 bits and by Barrett reduction to 32 */
__attribute__((target("pclmul,sse4.1"), always_inline)) static inline uint32_t
crc32_fold_tail(__m128i x1, __m128i x0, const unsigned char *buf, Py_ssize_t len)
{
    static const uint64_t k5k0[2] __attribute__((aligned(16))) = {0x0163cd6124ULL, 0x0000000000ULL};
    static const uint64_t poly[2] __attribute__((aligned(16))) = {0x01db710641ULL, 0x01f7011641ULL};
    __m128i x2, x3, x5;
    while (len >= 16) { /* single blocks of 16 */
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10); /* 128 bits to 64 */
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = _mm_loadl_epi64((const __m128i *)k5k0);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    x0 = _mm_load_si128((const __m128i *)poly); /* Barrett reduction to 32 bits */
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

/* CRC-32 by carry-less multiplication (Intel, "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ"; the bit-reflected constants as zlib-chromium uses them): ``len`` >= 64, a multiple of
 * 16; ``crc`` the running state (inverted). Checked against zlib by tests/test_native.py. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_clmul(const unsigned char *buf, Py_ssize_t len,
                                                                     uint32_t crc)
{
    static const uint64_t k1k2[2] __attribute__((aligned(16))) = {0x0154442bd4ULL, 0x01c6e41596ULL};
    static const uint64_t k3k4[2] __attribute__((aligned(16))) = {0x01751997d0ULL, 0x00ccaa009eULL};
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;

    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = _mm_load_si128((const __m128i *)k1k2);
    buf += 64;
    len -= 64;
    while (len >= 64) { /* fold four blocks of 16 at a time */
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        y5 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        y6 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        y7 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        y8 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
        buf += 64;
        len -= 64;
    }
    x0 = _mm_load_si128((const __m128i *)k3k4); /* into 128 bits */
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    return crc32_fold_tail(x1, x0, buf, len);
}
static int use_clmul = 0;

/* crc32_clmul8's folding from its first eight blocks, ``x`` (the running state already in them),
 * on: ``len`` more bytes at ``buf``, a multiple of 16 */
__attribute__((target("avx,pclmul,sse4.1"), always_inline)) static inline uint32_t
crc32_fold8(__m128i *x, const unsigned char *buf, Py_ssize_t len)
{
    static const uint64_t k8[2] __attribute__((aligned(16))) = {0x01e88ef372ULL, 0x014a7fe880ULL};
    static const uint64_t k1k2[2] __attribute__((aligned(16))) = {0x0154442bd4ULL, 0x01c6e41596ULL};
    static const uint64_t k3k4[2] __attribute__((aligned(16))) = {0x01751997d0ULL, 0x00ccaa009eULL};
    __m128i x0 = _mm_load_si128((const __m128i *)k8), x1, x5;
    while (len >= 128) { /* fold eight blocks of 16 at a time */
        _Pragma("GCC unroll 8")
        for (int i = 0; i < 8; i++) {
            __m128i lo = _mm_clmulepi64_si128(x[i], x0, 0x00), hi = _mm_clmulepi64_si128(x[i], x0, 0x11);
            x[i] = _mm_xor_si128(_mm_xor_si128(hi, lo), _mm_loadu_si128((const __m128i *)(buf + 16 * i)));
        }
        buf += 128;
        len -= 128;
    }
    x0 = _mm_load_si128((const __m128i *)k1k2); /* eight into four: each 64 bytes on */
    _Pragma("GCC unroll 8")
    for (int i = 0; i < 4; i++) {
        __m128i lo = _mm_clmulepi64_si128(x[i], x0, 0x00), hi = _mm_clmulepi64_si128(x[i], x0, 0x11);
        x[i + 4] = _mm_xor_si128(_mm_xor_si128(hi, lo), x[i + 4]);
    }
    if (len >= 64) { /* one more round of four */
        _Pragma("GCC unroll 8")
        for (int i = 0; i < 4; i++) {
            __m128i lo = _mm_clmulepi64_si128(x[i + 4], x0, 0x00), hi = _mm_clmulepi64_si128(x[i + 4], x0, 0x11);
            x[i + 4] = _mm_xor_si128(_mm_xor_si128(hi, lo), _mm_loadu_si128((const __m128i *)(buf + 16 * i)));
        }
        buf += 64;
        len -= 64;
    }
    x0 = _mm_load_si128((const __m128i *)k3k4); /* into 128 bits */
    x1 = x[4];
    _Pragma("GCC unroll 8")
    for (int i = 5; i < 8; i++) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x[i]), x5);
    }
    return crc32_fold_tail(x1, x0, buf, len);
}

/* the same by eight blocks of 16 at a time (128 bytes a round: the fold constants x^(8*128+32) and
 * x^(8*128-32) mod P, reflected as above), VEX-encoded (AVX: the loads folded into the xors); the
 * eight then folded into four (x^(4*128+-32)) and finished as crc32_clmul does: ``len`` >= 128, a
 * multiple of 16. Fewer instructions a byte than four at a time; checked against zlib by
 * tests/test_native_crc.py. */
__attribute__((target("avx,pclmul,sse4.1"))) static uint32_t crc32_clmul8(const unsigned char *buf, Py_ssize_t len,
                                                                         uint32_t crc)
{
    __m128i x[8];

    _Pragma("GCC unroll 8")

    for (int i = 0; i < 8; i++)
        x[i] = _mm_loadu_si128((const __m128i *)(buf + 16 * i));
    x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128((int)crc));
    return crc32_fold8(x, buf + 128, len - 128);
}

/* crc32_fold8 from its first eight blocks on, by VPCLMULQDQ (four 16-byte blocks to a 512-bit
 * register, two registers a multiplication each): the eight as two registers, and while 256 bytes or
 * more are left, two more and all four folded 256 bytes on at a time (the constants x^(16*128+-32)
 * mod P, reflected as above); the first two then folded onto the last two (k8, 128 bytes on) and
 * those on while 128 bytes are left; the eight blocks they hold finished by crc32_fold8 (under 128
 * bytes left: its eight-into-four, four-into-one and 16-byte tail). The same CRC as crc32_fold8,
 * fewer instructions a byte; checked against zlib at every length about its edges by
 * tests/test_native_crc.py (and against the 128-bit path, EMU_NO_VPCLMUL=1). */
#define CRC_V512_TARGET "avx512f,vpclmulqdq,avx,pclmul,sse4.1"
__attribute__((target(CRC_V512_TARGET), always_inline)) static inline __m512i
crc32_fold512(__m512i z, __m512i k, __m512i data)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00), _mm512_clmulepi64_epi128(z, k, 0x11), data,
                                     0x96); /* (lo ^ hi ^ data) */
}

__attribute__((target(CRC_V512_TARGET))) static uint32_t crc32_fold8_v512(__m128i *x, const unsigned char *buf,
                                                                         Py_ssize_t len)
{
    static const uint64_t k16[2] __attribute__((aligned(16))) = {0x011542778aULL, 0x01322d1430ULL};
    static const uint64_t k8[2] __attribute__((aligned(16))) = {0x01e88ef372ULL, 0x014a7fe880ULL};
    __m512i z0 = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(x[0]), x[1], 1),
                                                       x[2], 2), x[3], 3);
    __m512i z1 = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(x[4]), x[5], 1),
                                                       x[6], 2), x[7], 3);
    __m512i kk = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)k8));
    if (len >= 384) { /* (two more registers, then at least one round of 256) */
        __m512i z2 = _mm512_loadu_si512((const void *)buf), z3 = _mm512_loadu_si512((const void *)(buf + 64));
        __m512i k4 = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)k16));
        buf += 128;
        len -= 128;
        while (len >= 256) {
            z0 = crc32_fold512(z0, k4, _mm512_loadu_si512((const void *)buf));
            z1 = crc32_fold512(z1, k4, _mm512_loadu_si512((const void *)(buf + 64)));
            z2 = crc32_fold512(z2, k4, _mm512_loadu_si512((const void *)(buf + 128)));
            z3 = crc32_fold512(z3, k4, _mm512_loadu_si512((const void *)(buf + 192)));
            buf += 256;
            len -= 256;
        }
        z0 = crc32_fold512(z0, kk, z2); /* (the first two onto the last two: 128 bytes on) */
        z1 = crc32_fold512(z1, kk, z3);
    }
    while (len >= 128) {
        z0 = crc32_fold512(z0, kk, _mm512_loadu_si512((const void *)buf));
        z1 = crc32_fold512(z1, kk, _mm512_loadu_si512((const void *)(buf + 64)));
        buf += 128;
        len -= 128;
    }
    x[0] = _mm512_extracti32x4_epi32(z0, 0);
    x[1] = _mm512_extracti32x4_epi32(z0, 1);
    x[2] = _mm512_extracti32x4_epi32(z0, 2);
    x[3] = _mm512_extracti32x4_epi32(z0, 3);
    x[4] = _mm512_extracti32x4_epi32(z1, 0);
    x[5] = _mm512_extracti32x4_epi32(z1, 1);
    x[6] = _mm512_extracti32x4_epi32(z1, 2);
    x[7] = _mm512_extracti32x4_epi32(z1, 3);
    return crc32_fold8(x, buf, len);
}

/* crc32_clmul8 by crc32_fold8_v512 */
__attribute__((target(CRC_V512_TARGET))) static uint32_t crc32_clmul8_v512(const unsigned char *buf, Py_ssize_t len,
                                                                          uint32_t crc)
{
    __m128i x[8];

    _Pragma("GCC unroll 8")

    for (int i = 0; i < 8; i++)
        x[i] = _mm_loadu_si128((const __m128i *)(buf + 16 * i));
    x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128((int)crc));
    return crc32_fold8_v512(x, buf + 128, len - 128);
}

/* zlib's CRC-32 of the ``len`` (>= 144) bytes at ``b`` -- which has 15 bytes before it that may be
 * read (a bytes object's header: crc32_pybytes) -- all by folding, no bytes left over for the table:
 * the message as if ``pad`` = -len mod 16 zero bytes came before it, its first four bytes inverted
 * (zlib's initial 0xFFFFFFFF). Zeros before the message leave a CRC that starts at 0 at 0, so that
 * is the same CRC; the first block is read from ``b - pad``, its bytes before ``b`` masked off.
 * The eight first blocks into ``x``; returns the virtual start. */
__attribute__((target("avx,pclmul,sse4.1"), always_inline)) static inline const unsigned char *
crc32_padded_head(const unsigned char *b, Py_ssize_t len, __m128i *x)
{
    static const unsigned char keep[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                           0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                           0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    static const unsigned char inv[64] = {[32] = 0xFF, [33] = 0xFF, [34] = 0xFF, [35] = 0xFF};
    Py_ssize_t pad = -len & 15;
    const unsigned char *vs = b - pad; /* (the virtual start: pad bytes before b, read and masked off) */

    _Pragma("GCC unroll 8")

    for (int i = 0; i < 8; i++)
        x[i] = _mm_loadu_si128((const __m128i *)(vs + 16 * i));
    /* bytes [pad, pad + 4) of the virtual message inverted: in the first block, or straddling into the second */
    x[0] = _mm_xor_si128(_mm_and_si128(x[0], _mm_loadu_si128((const __m128i *)(keep + 16 - pad))),
                         _mm_loadu_si128((const __m128i *)(inv + 32 - pad)));
    x[1] = _mm_xor_si128(x[1], _mm_loadu_si128((const __m128i *)(inv + 48 - pad)));
    return vs;
}

__attribute__((target("avx,pclmul,sse4.1"))) static uint32_t crc32_clmul8_padded(const unsigned char *b,
                                                                                Py_ssize_t len)
{
    __m128i x[8];
    const unsigned char *vs = crc32_padded_head(b, len, x);
    return crc32_fold8(x, vs + 128, len + (-len & 15) - 128) ^ 0xFFFFFFFFu;
}

__attribute__((target(CRC_V512_TARGET))) static uint32_t crc32_clmul8_padded_v512(const unsigned char *b,
                                                                                 Py_ssize_t len)
{
    __m128i x[8];
    const unsigned char *vs = crc32_padded_head(b, len, x);
    return crc32_fold8_v512(x, vs + 128, len + (-len & 15) - 128) ^ 0xFFFFFFFFu;
}
/* crc32_clmul8's CPU: AVX, and its registers saved by the OS (OSXSAVE, XCR0's SSE and AVX state);
 * asked once, on the first long CRC (EMU_NO_CLMUL8 set: never) */
static int use_clmul8 = -1;
static int clmul8_usable(void)
{
    unsigned int eax, ebx, ecx, edx, lo, hi;
    if (getenv("EMU_NO_CLMUL8") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27)) ||
        !(ecx & (1u << 28)))
        return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
}
/* crc32_fold8_v512's CPU: AVX-512F and VPCLMULQDQ, and the OS saving the 512-bit registers (XCR0's
 * opmask, ZMM and high-ZMM state besides SSE and AVX); asked once, on the first long CRC, after
 * clmul8_usable (EMU_NO_VPCLMUL set: never) */
static int use_v512 = -1;
static int v512_usable(void)
{
    unsigned int eax, ebx, ecx, edx, lo, hi;
    if (getenv("EMU_NO_VPCLMUL") || !clmul8_usable() || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) ||
        !(ebx & (1u << 16)) || !(ecx & (1u << 10)))
        return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xE6) == 0xE6;
}
#endif

static uint32_t crc32_of(const unsigned char *b, Py_ssize_t len)
{
    uint32_t c = 0xFFFFFFFFu;
#ifdef HAVE_CLMUL_CRC
    if (use_clmul && len >= 64) {
        Py_ssize_t chunk = len & ~(Py_ssize_t)15;
        if (chunk >= 128 && use_clmul8 < 0) {
            use_clmul8 = clmul8_usable();
            use_v512 = use_clmul8 && v512_usable();
        }
        c = chunk >= 256 && use_v512 ? crc32_clmul8_v512(b, chunk, c)
            : chunk >= 128 && use_clmul8 ? crc32_clmul8(b, chunk, c) : crc32_clmul(b, chunk, c);
        b += chunk;
        len -= chunk;
    }
#endif
    while (len >= 8) {
        uint32_t lo = c ^ ((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
        uint32_t hi = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
        c = crc_t[7][lo & 0xFF] ^ crc_t[6][(lo >> 8) & 0xFF] ^ crc_t[5][(lo >> 16) & 0xFF] ^ crc_t[4][lo >> 24] ^
            crc_t[3][hi & 0xFF] ^ crc_t[2][(hi >> 8) & 0xFF] ^ crc_t[1][(hi >> 16) & 0xFF] ^ crc_t[0][hi >> 24];
        b += 8;
        len -= 8;
    }
    while (len--)
        c = crc_t[0][(c ^ *b++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* -- one byte changed: the CRC-32 of a message that differs from one whose CRC is ``crc`` only in
 * its byte at ``z`` bytes before its end, by ``d`` (old xor new), without reading the message: CRC-32
 * is affine, so the change is the raw CRC of d followed by z zero bytes, d's table entry times
 * x^(8z) modulo the polynomial (zlib's crc32_combine: multmodp, x2nmodp). The changes of each of
 * a byte's 8 bits at the last distances seen are kept (one frame length after another, the same few). */
static uint32_t crc_multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = (uint32_t)1 << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ 0xEDB88320u : b >> 1;
    }
    return p;
}

static uint32_t crc_x2n[32]; /* x^(2^k) mod P */
/* per distance z (the last lengths seen, by z mod 64): the change of one byte's bit b at that distance,
 * for b = 0..7 -- a byte's change is the xor of its bits' (linear), at most 8 xors instead of a
 * 32-step multiplication */
static struct { Py_ssize_t z; uint32_t bit[8]; } crc_pw_cache[64];

static const uint32_t *crc_bits(Py_ssize_t z)
{
    int slot = (int)(z & 63);
    if (crc_pw_cache[slot].z == z + 1) /* (z + 1: 0 marks an empty slot) */
        return crc_pw_cache[slot].bit;
    if (crc_x2n[0] == 0) {
        uint32_t p = (uint32_t)1 << 30; /* x^1 */
        crc_x2n[0] = p;
        for (int k = 1; k < 32; k++)
            crc_x2n[k] = p = crc_multmodp(p, p);
    }
    uint32_t p = (uint32_t)1 << 31; /* x^0 */
    Py_ssize_t n = z;
    for (unsigned k = 3; n; n >>= 1, k++)
        if (n & 1)
            p = crc_multmodp(crc_x2n[k & 31], p);
    for (int b = 0; b < 8; b++)
        crc_pw_cache[slot].bit[b] = crc_multmodp(p, crc_t[0][1u << b]);
    crc_pw_cache[slot].z = z + 1;
    return crc_pw_cache[slot].bit;
}

static inline uint32_t crc32_one_byte(uint32_t crc, unsigned d, Py_ssize_t z)
{
    if (!(d & 0xFF))
        return crc;
    const uint32_t *bit = crc_bits(z);
    for (int b = 0; b < 8; b++)
        if (d >> b & 1)
            crc ^= bit[b];
    return crc;
}

/* crc32_one_byte(crc, old ^ new, z) for Python (tests/test_native.py checks it against zlib) */
static PyObject *crc32_byte(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long crc, d, z;
    if (nargs != 3 || !get_ll(args[0], &crc) || !get_ll(args[1], &d) || !get_ll(args[2], &z) || crc < 0 ||
        crc > 0xFFFFFFFFLL || d < 0 || d > 0xFF || z < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "crc32_byte(crc, old ^ new byte, bytes after it)");
        return NULL;
    }
    return PyLong_FromUnsignedLong(crc32_one_byte((uint32_t)crc, (unsigned)d, (Py_ssize_t)z));
}

/* crc32_of the bytes of ``o`` (exact bytes): its leading bytes folded with the rest (crc32_clmul8_padded
 * reads up to 15 bytes before them, inside the object's header) -- the receive side's FCS check of
 * a frame of any length in one pass, no bytes left over for the table */
static uint32_t crc32_pybytes(PyObject *o)
{
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(o);
    Py_ssize_t len = PyBytes_GET_SIZE(o);
#ifdef HAVE_CLMUL_CRC
    _Static_assert(offsetof(PyBytesObject, ob_sval) >= 15, "a bytes object's header is 15 bytes or more");
    if (use_clmul && len >= 144) {
        if (use_clmul8 < 0) {
            use_clmul8 = clmul8_usable();
            use_v512 = use_clmul8 && v512_usable();
        }
        for (Py_ssize_t k = 64; k < len; k += 64) /* (every line asked for at once: a frame checked long
                                                   * after it was written is mostly out of the cache) */
            __builtin_prefetch(b + k);
        if (use_v512 && len >= 256)
            return crc32_clmul8_padded_v512(b, len);
        if (use_clmul8)
            return crc32_clmul8_padded(b, len);
    }
#endif
    return crc32_of(b, len);
}

static PyObject *crc32(PyObject *self, PyObject *arg)
{
    if (PyBytes_CheckExact(arg))
        return PyLong_FromUnsignedLong(crc32_pybytes(arg));
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = crc32_of(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}


/* which CRC-32 a long frame gets here (its CPU decided, as the first long CRC does): "vpclmul512",
 * "clmul8", "clmul" or "table" (tests/test_native_crc.py: the path it checks is the one in use) */
static PyObject *crc32_path(PyObject *self, PyObject *unused)
{
#ifdef HAVE_CLMUL_CRC
    if (use_clmul && use_clmul8 < 0) {
        use_clmul8 = clmul8_usable();
        use_v512 = use_clmul8 && v512_usable();
    }
    return PyUnicode_FromString(!use_clmul ? "table" : use_v512 ? "vpclmul512" : use_clmul8 ? "clmul8" : "clmul");
#else
    return PyUnicode_FromString("table");
#endif
}

#endif /* EMU_CSRC_CRC_H */
