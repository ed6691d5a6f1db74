//! CRC32C, the checksum of every v2 record batch: the one place it is
//! computed (the batch builder, the readers' `verify_crc`, the producer's
//! re-stamp on retry).
//!
//! Computed with `crc-fast`, which folds by carry-less multiplication
//! (VPCLMULQDQ with AVX-512, else PCLMULQDQ, chosen at run time), not with
//! the `crc32c` crate's three streams of the SSE4.2 `crc32` instruction. On
//! session 26's Xeon (`cargo bench --bench codec -- crc32c`): 59.7 against
//! 14.7 GiB/s over 64 KiB (a fetched batch is checked whole), 41.5 against
//! 14.5 over the builder's 4 KiB steps, 6.4 against 4.3 over 110 bytes. The
//! crate's had been ~7 ns of the ~35 ns a 100 B record's decode took
//! (perf of `decode_10x1000x100B_into_columns`). The `crc32c` crate stays
//! as the tests' oracle.
//!
//! A v2 batch's CRC covers its header fields and then its records. The
//! builder checksums the records as they are appended (while they are still
//! in cache) and learns the header only at `finish`; `combine` joins the two.
//! The `crc32c` crate has a combine too, but the old zlib kind that squares
//! 32x32 bit matrices once per bit of the length: about 100 µs for a 1 MB
//! batch, more than checksumming it. This one multiplies polynomials
//! instead: a few dozen 32-step products, under a microsecond.
//!
//! CRC32C works on polynomials over GF(2) modulo the Castagnoli polynomial,
//! bit-reflected: bit 31 holds the coefficient of x^0, bit 0 that of x^31.
//! Appending n bytes to a stream multiplies its CRC by x^(8n) before the new
//! bytes' own CRC is added (xor), so CRC(a ++ b) = CRC(a) * x^(8 len(b)) ^ CRC(b).

use crc_fast::{CrcAlgorithm::Crc32Iscsi, Digest};

/// CRC32C of `data`.
#[inline]
pub fn checksum(data: &[u8]) -> u32 {
    crc_fast::checksum(Crc32Iscsi, data) as u32
}

/// CRC32C of `a ++ data`, from `crc` = CRC32C of `a`.
#[inline]
pub fn append(crc: u32, data: &[u8]) -> u32 {
    // The digest's state is the register before the final inversion.
    let mut d = Digest::new_with_init_state(Crc32Iscsi, u64::from(!crc));
    d.update(data);
    d.finalize() as u32
}

/// The Castagnoli polynomial, reflected (x^32 implied).
const POLY: u32 = 0x82F6_3B78;

/// `a * b` modulo the polynomial, both reflected.
const fn mul_mod(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    // From x^0 (bit 31) upwards: add b * x^i for each term of a, keeping
    // b = b_initial * x^i reduced as i grows.
    let mut bit = 1u32 << 31;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        bit >>= 1;
    }
    product
}

/// `X_POW2[k]` is x^(2^k) modulo the polynomial: squaring the one before.
/// 72 entries cover 8 * len for any `usize` len without wrapping around (the
/// powers do cycle, but with a period that depends on the polynomial's
/// factors; not relying on it is simpler than proving it).
const X_POW2: [u32; 72] = {
    let mut t = [0u32; 72];
    let mut p = 1u32 << 30; // x^1
    let mut k = 0;
    while k < 72 {
        t[k] = p;
        p = mul_mod(p, p);
        k += 1;
    }
    t
};

/// CRC32C of `a ++ b` from `crc_a`, `crc_b` and the length of `b`.
pub fn combine(crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
    // x^(8 len_b) as the product of x^(2^k) over the set bits of 8 len_b.
    let mut shift = 1u32 << 31; // x^0
    let mut n = len_b;
    let mut k = 3; // 8 = 2^3
    while n != 0 {
        if n & 1 != 0 {
            shift = mul_mod(X_POW2[k], shift);
        }
        n >>= 1;
        k += 1;
    }
    mul_mod(shift, crc_a) ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length up to a few of the folding's blocks and a large one,
    /// whole and split at several points, against the `crc32c` crate.
    #[test]
    fn checksum_and_append_agree_with_the_crc32c_crate() {
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(checksum(b"123456789"), 0xe306_9283);
        let lens = (0..600).chain([4095, 4096, 4097, 65_536, 110_011, 300_000]);
        for n in lens {
            let d = &data[..n];
            assert_eq!(checksum(d), crc32c::crc32c(d), "{n}");
            for cut in [0, 1, n / 3, n.saturating_sub(1), n] {
                let (a, b) = d.split_at(cut.min(n));
                let want = crc32c::crc32c_append(crc32c::crc32c(a), b);
                assert_eq!(append(checksum(a), b), want, "{n} cut at {cut}");
            }
        }
    }

    #[test]
    fn combine_agrees_with_checksumming_the_concatenation() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for (a, b) in [
            (0, 0),
            (0, 1),
            (1, 0),
            (21, 40),
            (40, 4096),
            (3, 65_537),
            (61, 69_000),
        ] {
            let (x, y) = (&data[..a], &data[a..a + b]);
            let whole = checksum(&data[..a + b]);
            assert_eq!(combine(checksum(x), checksum(y), b), whole, "{a} + {b}");
            // And the crate's own (slow) combine, as a second witness.
            assert_eq!(crc32c::crc32c_combine(checksum(x), checksum(y), b), whole);
        }
    }
}
