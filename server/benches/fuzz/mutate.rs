//! Inputs for the fuzz targets: random bytes, and valid shapes broken by a
//! few mutations (truncation, byte and bit flips, huge numbers, deep
//! nesting, unicode, splices of the target's own vocabulary).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Numbers that break naive parsers: overflow at each width, exponents,
/// signs, the words `f64::from_str` accepts, and JSON's forbidden spellings.
const ODD_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "255",
    "256",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "1e309",
    "-1e309",
    "1.7976931348623157e308",
    "4.9e-324",
    "1e-400",
    "0.000000000000000000000000000000000001",
    "123456789012345678901234567890123456789",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "-Infinity",
    "1.",
    ".5",
    "1e",
    "0x10",
    "00",
    "1_000",
];

/// Characters and escapes that test UTF-8 and escape handling.
const ODD_TEXT: &[&str] = &[
    "\0",
    "\u{7f}",
    "\u{80}",
    "é",
    "ß",
    "\u{feff}",
    "\u{200b}",
    "\u{202e}",
    "\u{2028}",
    "\u{fffd}",
    "𝄞",
    "🙂",
    "\u{10ffff}",
    "\\u0000",
    "\\ud800",
    "\\udc00\\ud800",
    "\\uD834\\uDD1E",
    "\\x",
    "\\",
    "\\\\",
    "\\'",
    "\\n",
    "\"",
    "'",
    "\t",
    "\r\n",
    "\n",
    " ",
];

/// A seeded source of inputs for one target.
pub struct Gen {
    /// The random source (exposed for the targets' shape generators).
    pub rng: StdRng,
    dict: &'static [&'static str],
}

impl Gen {
    /// A generator seeded with `seed` that splices words from `dict`.
    pub fn new(seed: u64, dict: &'static [&'static str]) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            dict,
        }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n)
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// An odd number's spelling.
    pub fn odd_number(&mut self) -> &'static str {
        self.pick(ODD_NUMBERS)
    }

    /// Short text, sometimes with odd characters in it.
    pub fn text(&mut self, max: usize) -> String {
        let len = self.below(max + 1);
        let mut s = String::with_capacity(len);
        while s.len() < len {
            match self.below(10) {
                0 => s.push_str(self.pick(ODD_TEXT)),
                1 => s.push(char::from_u32(self.rng.random_range(0..0x11_0000)).unwrap_or('?')),
                _ => s.push(char::from(self.rng.random_range(b'a'..=b'z'))),
            }
        }
        s
    }

    /// Random bytes, mostly short.
    pub fn random_bytes(&mut self) -> Vec<u8> {
        let len = if self.chance(0.9) {
            self.below(256)
        } else {
            self.below(8192)
        };
        let mut v = vec![0u8; len];
        self.rng.fill(&mut v[..]);
        if self.chance(0.5) {
            // Printable noise with the target's words in it reaches further.
            for b in &mut v {
                *b = b' ' + (*b % 95);
            }
            for _ in 0..self.below(6) {
                let word = self.pick(self.dict).as_bytes().to_vec();
                let at = self.below(v.len() + 1);
                v.splice(at..at, word);
            }
        }
        v
    }

    /// `input` after 1–6 mutations (one, half the time: a single break
    /// keeps the rest of the shape valid and reaches deeper checks).
    pub fn mutate(&mut self, mut input: Vec<u8>) -> Vec<u8> {
        let rounds = if self.chance(0.5) {
            1
        } else {
            2 + self.below(5)
        };
        for _ in 0..rounds {
            self.mutate_once(&mut input);
        }
        input
    }

    fn mutate_once(&mut self, v: &mut Vec<u8>) {
        let at = self.below(v.len() + 1);
        match self.below(12) {
            // Truncation.
            0 => v.truncate(at),
            // A byte replaced.
            1 if at < v.len() => v[at] = self.rng.random(),
            // A bit flipped.
            2 if at < v.len() => v[at] ^= 1 << self.below(8),
            // A range removed.
            3 => {
                let end = (at + self.below(16)).min(v.len());
                v.drain(at..end);
            }
            // A range repeated.
            4 => {
                let end = (at + self.below(32)).min(v.len());
                let chunk = v[at..end].to_vec();
                for _ in 0..1 + self.below(4) {
                    v.splice(at..at, chunk.iter().copied());
                }
            }
            // A number replaced by an odd one (or one inserted).
            5 | 6 => {
                let odd = self.odd_number().as_bytes().to_vec();
                match v.iter().position(|b| b.is_ascii_digit()) {
                    Some(first) if self.chance(0.8) => {
                        // Pick one of the digit runs, not always the first.
                        let starts: Vec<usize> = (first..v.len())
                            .filter(|&i| {
                                v[i].is_ascii_digit() && (i == 0 || !v[i - 1].is_ascii_digit())
                            })
                            .collect();
                        let start = self.pick(&starts);
                        let end = (start..v.len())
                            .find(|&i| !v[i].is_ascii_digit())
                            .unwrap_or(v.len());
                        v.splice(start..end, odd);
                    }
                    _ => {
                        v.splice(at..at, odd);
                    }
                }
            }
            // Deep nesting.
            7 => {
                let depth = self.pick(&[2usize, 16, 64, 129, 1000, 5000]);
                let open: &[u8] = self.pick(&[&b"["[..], b"{\"a\":", b"(", b"<point>"]);
                let nest: Vec<u8> = open.repeat(depth);
                v.splice(at..at, nest);
            }
            // Unicode or an escape.
            8 => {
                let t = self.pick(ODD_TEXT).as_bytes().to_vec();
                v.splice(at..at, t);
            }
            // A word of the target's vocabulary.
            9 | 10 => {
                let w = self.pick(self.dict).as_bytes().to_vec();
                v.splice(at..at, w);
            }
            // Invalid UTF-8.
            _ => {
                let bad: &[u8] = self.pick(&[&b"\xff"[..], b"\xc3", b"\xed\xa0\x80", b"\xf4\x90"]);
                v.splice(at..at, bad.iter().copied());
            }
        }
    }
}

/// `bytes` in hex, cut to `max` bytes.
pub fn hex_prefix(bytes: &[u8], max: usize) -> String {
    let cut = &bytes[..bytes.len().min(max)];
    let mut s = hex::encode(cut);
    if bytes.len() > max {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}
