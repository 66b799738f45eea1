//! What makes configured secret material look made by hand rather than drawn at random: the
//! tests `SecretKey::parse` applies to key material (`VCODE_SECRET_KEY`, `_PREVIOUS`) and the
//! lighter one `VCODE_ADMIN_TOKEN` gets. A refused secret stops start-up, so each of a key's
//! tests is one that random bytes fail with a chance below 2^-40 (a union bound, computed for
//! the key's length): `openssl rand` output never trips them, the examples people type do.
//!
//! Each test looks at the bytes and at the steps between successive bytes (`b[i+1] - b[i]`
//! mod 256): the steps of random bytes are random bytes too, and a counting pattern (`00 01
//! 02 …`, `b1 b2 b3 …`) has steps as constant as a repeated byte.

/// A random key fails one test with a chance below 2^this.
const CHANCE_LOG2: f64 = -40.0;

/// Why `key` does not look random, if it does not: a block repeated, few distinct values, one
/// value too often, a long run, in its bytes or in the steps between them.
pub fn key_weakness(key: &[u8]) -> Option<String> {
    let steps: Vec<u8> = key.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    sequence_weakness(key, false).or_else(|| sequence_weakness(&steps, true))
}

/// The admin token's test: no short block repeated, in its characters or in the steps between
/// them (`aaaa…`, `abab…`, `changemechangeme`, `abcdefgh…`). Lighter than a key's: a token is
/// text of any alphabet (a hex token has 16 distinct characters at most), so the counting tests
/// would refuse honest tokens. A random hex token of 16 characters repeats a block with a chance
/// below 2^-31.
pub fn token_weakness(token: &str) -> Option<String> {
    let bytes = token.as_bytes();
    let steps: Vec<u8> = bytes.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    if let Some(period) = short_period(bytes) {
        return Some(format!("it repeats a {period}-character block"));
    }
    short_period(&steps).map(|_| "its characters count up or down in a repeating pattern".into())
}

fn sequence_weakness(sequence: &[u8], steps: bool) -> Option<String> {
    let len = sequence.len();
    if let Some(period) = short_period(sequence) {
        return Some(if steps {
            "its bytes count up or down in a repeating pattern".to_owned()
        } else {
            format!("it repeats a {period}-byte block")
        });
    }
    let mut counts = [0usize; 256];
    for &byte in sequence {
        counts[usize::from(byte)] += 1;
    }
    let distinct = counts.iter().filter(|&&count| count > 0).count();
    if distinct <= fewest_distinct(len) {
        return Some(if steps {
            format!(
                "its {} bytes step up or down by only {distinct} distinct amounts",
                len + 1
            )
        } else {
            format!("only {distinct} distinct byte values in {len} bytes")
        });
    }
    let most = counts.iter().copied().max().unwrap_or(0);
    if most >= most_repeats(len) {
        return Some(if steps {
            format!("one step between successive bytes recurs {most} times")
        } else {
            format!("one byte value recurs {most} times in {len} bytes")
        });
    }
    let run = longest_run(sequence);
    if run >= shortest_long_run(len) {
        return Some(if steps {
            format!("{} bytes in a row count up or down by one step", run + 1)
        } else {
            format!("a run of {run} equal bytes")
        });
    }
    None
}

/// The shortest `p <= len / 2` with `s[i] == s[i + p]` throughout: the sequence is a block of
/// `p` repeated (the last copy may be cut). Random bytes have one with a chance below
/// `2 * 256^-(len/2)`.
fn short_period(sequence: &[u8]) -> Option<usize> {
    (1..=sequence.len() / 2).find(|&p| sequence.iter().zip(&sequence[p..]).all(|(a, b)| a == b))
}

fn longest_run(sequence: &[u8]) -> usize {
    sequence
        .chunk_by(|a, b| a == b)
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0)
}

/// `log2 C(n, k)` for k = 1, 2, … n, each from the one before.
fn log2_choose(n: usize) -> impl Iterator<Item = (usize, f64)> {
    (1..=n).scan(0.0, move |log2, k| {
        *log2 += ((n + 1 - k) as f64 / k as f64).log2();
        Some((k, *log2))
    })
}

/// The most distinct values refused in `len` bytes: `len` random bytes take their values from
/// some `k` of 256 with a chance at most `C(256, k) (k/256)^len` (16 for 32 bytes).
fn fewest_distinct(len: usize) -> usize {
    log2_choose(256)
        .take_while(|&(k, log2)| log2 + len as f64 * (k as f64 / 256.0).log2() <= CHANCE_LOG2)
        .last()
        .map_or(0, |(k, _)| k)
}

/// The fewest occurrences of one value refused in `len` bytes: some value recurs `m` times with
/// a chance at most `256 C(len, m) 256^-m` (10 for 32 bytes).
fn most_repeats(len: usize) -> usize {
    log2_choose(len)
        .find(|&(m, log2)| 8.0 + log2 - 8.0 * m as f64 <= CHANCE_LOG2)
        .map_or(len + 1, |(m, _)| m)
}

/// The shortest run of equal values refused in `len` bytes: a run of `r` starts somewhere with a
/// chance at most `len 256^-(r-1)` (7 for 32 bytes).
fn shortest_long_run(len: usize) -> usize {
    (1..=len)
        .find(|&r| (len as f64).log2() - 8.0 * (r - 1) as f64 <= CHANCE_LOG2)
        .unwrap_or(len + 1)
}

/// Secrets people type instead of drawing: common passwords and placeholders.
const TYPED: &[&str] = &[
    "",
    "password",
    "passw0rd",
    "secret",
    "changeme",
    "change-me",
    "change_me",
    "test",
    "testing",
    "admin",
    "root",
    "token",
    "apikey",
    "api-key",
    "api_key",
    "key",
    "letmein",
    "qwerty",
    "welcome",
    "default",
    "example",
    "sample",
    "demo",
    "vcode",
    "twilio",
    "authtoken",
    "auth_token",
    "auth-token",
    "monkey",
    "dragon",
    "iloveyou",
    "abc123",
    "123456",
    "12345678",
    "123456789",
    "1234567890",
    "111111",
    "000000",
    "654321",
    "vck_",
    "your-api-key",
    "your_auth_token",
    "your-auth-token",
    "xxxxxxxx",
];

/// Whether `digest` is the SHA-256 of a secret people type: one of [`TYPED`] in any of three
/// cases, with `123` or `!` after it; one character repeated, or a counting run of digits,
/// letters or hex (`0123…`, `abcd…`) up to 64 characters; or the entry's own `name`. The one
/// check a credential configured only as its digest can get: its strength is not otherwise
/// visible, so `vcode api-key` and `vcode twilio-account` draw the secrets themselves.
pub fn typed_secret_digest(digest: &[u8; 32], name: &str) -> bool {
    use sha2::{Digest, Sha256};
    static TYPED_DIGESTS: std::sync::LazyLock<std::collections::HashSet<[u8; 32]>> =
        std::sync::LazyLock::new(|| {
            typed_secrets()
                .map(|secret| Sha256::digest(secret).into())
                .collect()
        });
    let named = [name.to_owned(), name.to_lowercase(), format!("{name}123")];
    TYPED_DIGESTS.contains(digest)
        || named
            .iter()
            .any(|secret| <[u8; 32]>::from(Sha256::digest(secret)) == *digest)
}

fn typed_secrets() -> impl Iterator<Item = String> {
    let words = TYPED.iter().flat_map(|word| {
        let capital = word
            .get(..1)
            .map(|first| first.to_uppercase() + &word[1..])
            .unwrap_or_default();
        [word.to_string(), capital, word.to_uppercase()]
            .into_iter()
            .flat_map(|form| [form.clone(), format!("{form}123"), format!("{form}!")])
    });
    let alphabets = [
        "0123456789",
        "abcdefghijklmnopqrstuvwxyz",
        "0123456789abcdef",
    ];
    let runs = (1..=64).flat_map(move |len| {
        let repeated = "0123456789abcdefxXzZ"
            .chars()
            .map(move |c| c.to_string().repeat(len));
        let counting = alphabets
            .into_iter()
            .map(move |alphabet| alphabet.chars().cycle().take(len).collect::<String>());
        repeated.chain(counting)
    });
    words.chain(runs)
}

#[cfg(test)]
mod tests {
    use rand::RngExt;

    use super::*;

    fn weakness(hex: &str) -> Option<String> {
        key_weakness(&hex::decode(hex).unwrap())
    }

    #[test]
    fn typed_secrets_are_known_by_their_digest_and_drawn_ones_are_not() {
        use sha2::{Digest, Sha256};
        let digest = |secret: &str| -> [u8; 32] { Sha256::digest(secret).into() };
        for typed in [
            "changeme",
            "Password123",
            "SECRET!",
            "0000000000000000",
            "abcdefgh",
            "shop",
        ] {
            assert!(typed_secret_digest(&digest(typed), "shop"), "{typed}");
        }
        let drawn = format!("vck_{}", hex::encode(rand::random::<[u8; 32]>()));
        assert!(!typed_secret_digest(&digest(&drawn), "shop"));
    }

    #[test]
    fn the_thresholds_for_32_bytes_are_the_documented_ones() {
        // docs/configuration.md quotes these.
        assert_eq!(fewest_distinct(32), 16);
        assert_eq!(most_repeats(32), 10);
        assert_eq!(shortest_long_run(32), 7);
        // Longer keys are held to proportionally more.
        assert!(fewest_distinct(64) > fewest_distinct(32));
        assert!(fewest_distinct(4096) < 256 && most_repeats(4096) > 16);
    }

    #[test]
    fn constant_repeated_and_counting_keys_are_refused() {
        for (hex, reason) in [
            ("00".repeat(32), "a 1-byte block"),
            ("ff".repeat(32), "a 1-byte block"),
            ("ab".repeat(32), "a 1-byte block"),
            ("abcd".repeat(16), "a 2-byte block"),
            // A 16-byte block twice (the settings tests' old key).
            (
                "00112233445566778899aabbccddeeff".repeat(2),
                "a 16-byte block",
            ),
            // Counting up, by one or by another step, or down.
            (
                (0..32u8).map(|b| format!("{b:02x}")).collect(),
                "count up or down",
            ),
            (
                (0..32u8).map(|b| format!("{:02x}", 255 - 7 * b)).collect(),
                "count up or down",
            ),
            // Typed by hand: runs of counting with a jump between them.
            (
                "b1b2b3b4b5b6b7b8b9babbbcbdbebfb0a1a2a3a4a5a6a7a8a9aaabacadaeafa0".to_owned(),
                "distinct amounts",
            ),
            (
                "8f1c0e6a5b2d4c3e9a7f6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e".to_owned(),
                "distinct amounts",
            ),
            // Random bytes padded with zeros: one value too often, or a long run.
            (
                format!(
                    "{}{}",
                    "de95360cff70e64f70aa3bc9ea6a317ddcd7",
                    "00".repeat(14)
                ),
                "one byte value recurs 14 times",
            ),
            (
                format!(
                    "{}{}",
                    "de95360cff70e64f70aa3bc9ea6a317ddcd78988be83b861",
                    "00".repeat(8)
                ),
                "a run of 8 equal bytes",
            ),
            // Text: few letters.
            (
                hex::encode("passwordpassword-secretsecret-01"),
                "distinct byte values",
            ),
        ] {
            let found = weakness(&hex).unwrap_or_else(|| panic!("{hex} accepted"));
            assert!(found.contains(reason), "{hex}: {found}");
        }
    }

    #[test]
    fn random_keys_always_pass() {
        let mut rng = rand::rng();
        for (len, keys) in [
            (32, 10_000),
            (33, 1_000),
            (48, 1_000),
            (64, 1_000),
            (1024, 200),
        ] {
            for _ in 0..keys {
                let mut key = vec![0u8; len];
                rng.fill(&mut key[..]);
                assert_eq!(key_weakness(&key), None, "{}", hex::encode(&key));
            }
        }
    }

    #[test]
    fn tokens_that_repeat_a_block_or_count_are_refused_random_ones_pass() {
        for token in [
            "aaaaaaaaaaaaaaaa",
            "abababababababab",
            "changemechangeme",
            "abcdefghijklmnop",
        ] {
            assert!(token_weakness(token).is_some(), "{token}");
        }
        let mut rng = rand::rng();
        for _ in 0..5_000 {
            let mut bytes = [0u8; 8];
            rng.fill(&mut bytes[..]);
            // A 16-character hex token: the shortest and narrowest an operator would use.
            let token = hex::encode(bytes);
            assert_eq!(token_weakness(&token), None, "{token}");
        }
        assert_eq!(token_weakness("t0ken-0123456789abcdef"), None);
    }
}
