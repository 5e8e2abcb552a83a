//! The ext4 htree directory hash (kernel `fs/ext4/hash.c`,
//! `__ext4fs_dirhash()`): legacy, half-MD4 and TEA, signed and unsigned.
//!
//! Offline reading needs it for one thing: the kernel's no-key names carry
//! the entry's dirhash words (spec §8.1), and in a hashed directory the
//! kernel computes them over the stored ciphertext name with the
//! filesystem's hash. These are ext4's indexing hashes, not cryptographic
//! primitives, and no library provides them: they are implemented here
//! after the ext4 disk-format description ("Hash Tree Directories": the
//! legacy hash, half-MD4 with its three reduced rounds, TEA with 16
//! rounds, the name packed into 32-bit words with the signed or unsigned
//! char rule), with the kernel's function names so the two can be read
//! side by side. A kernel-made hashed directory checks the default,
//! half-MD4 (the no-key names of its long names must equal the kernel's:
//! `fscrypt-cli/tests/image_offline`); legacy and TEA have no kernel
//! comparison yet.

/// `DX_HASH_LEGACY`.
pub const DX_HASH_LEGACY: u8 = 0;
/// `DX_HASH_HALF_MD4`.
pub const DX_HASH_HALF_MD4: u8 = 1;
/// `DX_HASH_TEA`.
pub const DX_HASH_TEA: u8 = 2;
/// `DX_HASH_LEGACY_UNSIGNED`.
pub const DX_HASH_LEGACY_UNSIGNED: u8 = 3;
/// `DX_HASH_HALF_MD4_UNSIGNED`.
pub const DX_HASH_HALF_MD4_UNSIGNED: u8 = 4;
/// `DX_HASH_TEA_UNSIGNED`.
pub const DX_HASH_TEA_UNSIGNED: u8 = 5;
/// `EXT2_FLAGS_UNSIGNED_HASH` in `s_flags`.
pub const EXT2_FLAGS_UNSIGNED_HASH: u32 = 0x0002;

const EXT4_HTREE_EOF_32BIT: u32 = 0x7fff_ffff;

fn tea_transform(buf: &mut [u32; 4], input: &[u32]) {
    const DELTA: u32 = 0x9E37_79B9;
    let mut sum = 0u32;
    let (mut b0, mut b1) = (buf[0], buf[1]);
    let (a, b, c, d) = (input[0], input[1], input[2], input[3]);
    for _ in 0..16 {
        sum = sum.wrapping_add(DELTA);
        b0 = b0.wrapping_add(
            (b1 << 4).wrapping_add(a) ^ b1.wrapping_add(sum) ^ (b1 >> 5).wrapping_add(b),
        );
        b1 = b1.wrapping_add(
            (b0 << 4).wrapping_add(c) ^ b0.wrapping_add(sum) ^ (b0 >> 5).wrapping_add(d),
        );
    }
    buf[0] = buf[0].wrapping_add(b0);
    buf[1] = buf[1].wrapping_add(b1);
}

fn half_md4_transform(buf: &mut [u32; 4], x: &[u32]) {
    const K2: u32 = 0o13240474631;
    const K3: u32 = 0o15666365641;
    let f = |x: u32, y: u32, z: u32| z ^ (x & (y ^ z));
    let g = |x: u32, y: u32, z: u32| (x & y).wrapping_add((x ^ y) & z);
    let h = |x: u32, y: u32, z: u32| x ^ y ^ z;
    let (mut a, mut b, mut c, mut d) = (buf[0], buf[1], buf[2], buf[3]);
    macro_rules! round {
        ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $x:expr, $s:expr) => {
            $a = $a
                .wrapping_add($f($b, $c, $d))
                .wrapping_add($x)
                .rotate_left($s)
        };
    }
    round!(f, a, b, c, d, x[0], 3);
    round!(f, d, a, b, c, x[1], 7);
    round!(f, c, d, a, b, x[2], 11);
    round!(f, b, c, d, a, x[3], 19);
    round!(f, a, b, c, d, x[4], 3);
    round!(f, d, a, b, c, x[5], 7);
    round!(f, c, d, a, b, x[6], 11);
    round!(f, b, c, d, a, x[7], 19);

    round!(g, a, b, c, d, x[1].wrapping_add(K2), 3);
    round!(g, d, a, b, c, x[3].wrapping_add(K2), 5);
    round!(g, c, d, a, b, x[5].wrapping_add(K2), 9);
    round!(g, b, c, d, a, x[7].wrapping_add(K2), 13);
    round!(g, a, b, c, d, x[0].wrapping_add(K2), 3);
    round!(g, d, a, b, c, x[2].wrapping_add(K2), 5);
    round!(g, c, d, a, b, x[4].wrapping_add(K2), 9);
    round!(g, b, c, d, a, x[6].wrapping_add(K2), 13);

    round!(h, a, b, c, d, x[3].wrapping_add(K3), 3);
    round!(h, d, a, b, c, x[7].wrapping_add(K3), 9);
    round!(h, c, d, a, b, x[2].wrapping_add(K3), 11);
    round!(h, b, c, d, a, x[6].wrapping_add(K3), 15);
    round!(h, a, b, c, d, x[1].wrapping_add(K3), 3);
    round!(h, d, a, b, c, x[5].wrapping_add(K3), 9);
    round!(h, c, d, a, b, x[0].wrapping_add(K3), 11);
    round!(h, b, c, d, a, x[4].wrapping_add(K3), 15);

    buf[0] = buf[0].wrapping_add(a);
    buf[1] = buf[1].wrapping_add(b);
    buf[2] = buf[2].wrapping_add(c);
    buf[3] = buf[3].wrapping_add(d);
}

fn dx_hack_hash(name: &[u8], signed: bool) -> u32 {
    let (mut hash0, mut hash1) = (0x12a3_fe2du32, 0x37ab_e8f9u32);
    for &c in name {
        let v = if signed {
            (c as i8 as i32) as u32
        } else {
            u32::from(c)
        };
        let mut hash = hash1.wrapping_add(hash0 ^ v.wrapping_mul(7_152_373));
        if hash & 0x8000_0000 != 0 {
            hash = hash.wrapping_sub(0x7fff_ffff);
        }
        hash1 = hash0;
        hash0 = hash;
    }
    hash0 << 1
}

/// Kernel `str2hashbuf_{signed,unsigned}()`: fill `num` words from `msg`.
fn str2hashbuf(msg: &[u8], signed: bool, out: &mut [u32]) {
    let num = out.len();
    let len = msg.len() as u32;
    let mut pad = len | (len << 8);
    pad |= pad << 16;
    let mut val = pad;
    let take = msg.len().min(num * 4);
    let mut w = 0usize;
    for (i, &c) in msg[..take].iter().enumerate() {
        let v = if signed {
            (c as i8 as i32) as u32
        } else {
            u32::from(c)
        };
        val = v.wrapping_add(val << 8);
        if i % 4 == 3 {
            out[w] = val;
            w += 1;
            val = pad;
        }
    }
    if w < num {
        out[w] = val;
        w += 1;
    }
    for o in &mut out[w..] {
        *o = pad;
    }
}

/// `(hash, minor_hash)` of `name` with hash `version` (0..=5, the unsigned
/// variants already applied) and the superblock's `seed`; `None` for an
/// unknown version (the kernel then uses 0, 0).
pub fn ext4_dirhash(name: &[u8], version: u8, seed: &[u32; 4]) -> Option<(u32, u32)> {
    let mut buf = [0x6745_2301u32, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    if seed.iter().any(|&s| s != 0) {
        buf = *seed;
    }
    let (hash, minor) = match version {
        DX_HASH_LEGACY => (dx_hack_hash(name, true), 0),
        DX_HASH_LEGACY_UNSIGNED => (dx_hack_hash(name, false), 0),
        DX_HASH_HALF_MD4 | DX_HASH_HALF_MD4_UNSIGNED => {
            let signed = version == DX_HASH_HALF_MD4;
            let mut input = [0u32; 8];
            let mut p = name;
            while !p.is_empty() {
                str2hashbuf(p, signed, &mut input);
                half_md4_transform(&mut buf, &input);
                p = &p[p.len().min(32)..];
            }
            (buf[1], buf[2])
        }
        DX_HASH_TEA | DX_HASH_TEA_UNSIGNED => {
            let signed = version == DX_HASH_TEA;
            let mut input = [0u32; 4];
            let mut p = name;
            while !p.is_empty() {
                str2hashbuf(p, signed, &mut input);
                tea_transform(&mut buf, &input);
                p = &p[p.len().min(16)..];
            }
            (buf[0], buf[1])
        }
        _ => return None,
    };
    let mut hash = hash & !1;
    if hash == EXT4_HTREE_EOF_32BIT << 1 {
        hash = (EXT4_HTREE_EOF_32BIT - 1) << 1;
    }
    Some((hash, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_versions() {
        // An unknown version has no hash; every known one is even.
        assert_eq!(ext4_dirhash(b"x", 9, &[0; 4]), None);
        for v in 0..=5 {
            let (h, _) = ext4_dirhash(b"some name", v, &[1, 2, 3, 4]).expect("known");
            assert_eq!(h & 1, 0);
        }
        // Signed and unsigned differ only for bytes >= 0x80.
        let s = [7u32, 8, 9, 10];
        assert_eq!(
            ext4_dirhash(b"abc", DX_HASH_HALF_MD4, &s),
            ext4_dirhash(b"abc", DX_HASH_HALF_MD4_UNSIGNED, &s)
        );
        assert_ne!(
            ext4_dirhash(&[0xff, 0x80, 0x90], DX_HASH_HALF_MD4, &s),
            ext4_dirhash(&[0xff, 0x80, 0x90], DX_HASH_HALF_MD4_UNSIGNED, &s)
        );
    }
}
