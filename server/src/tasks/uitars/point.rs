//! The spellings of a point: `(x,y)`, `<point>x y</point>`, boxes, …

use super::action::Point;
use super::error::{ParseError, excerpt};

/// The longest number a point may hold (digits and one dot).
const MAX_NUMBER_LEN: usize = 32;

/// A point argument's value: `(x,y)`, `[x,y]`, `<point>x y</point>`, any of
/// these inside `<|box_start|>…<|box_end|>`, or a box of four numbers
/// (`(x1,y1,x2,y2)`, `[…]`, `<bbox>x1 y1 x2 y2</bbox>`), which stands for its
/// centre. Numbers are integers or decimals, never negative.
pub(super) fn parse_point(value: &str) -> Result<Point, ParseError> {
    let bad = |reason| ParseError::BadPoint {
        excerpt: excerpt(value),
        reason,
    };
    let mut inner = value.trim();
    for (open, close) in [
        ("<|box_start|>", "<|box_end|>"),
        ("<point>", "</point>"),
        ("<bbox>", "</bbox>"),
        ("(", ")"),
        ("[", "]"),
    ] {
        if let Some(rest) = inner.strip_prefix(open) {
            inner = rest
                .strip_suffix(close)
                .ok_or_else(|| bad("unclosed bracket or tag"))?
                .trim();
        }
    }
    let mut numbers = [0.0; 4];
    let mut count = 0;
    let tokens: Box<dyn Iterator<Item = &str>> = if inner.contains(',') {
        Box::new(inner.split(',').map(str::trim))
    } else {
        Box::new(inner.split_whitespace())
    };
    for token in tokens {
        let slot = numbers
            .get_mut(count)
            .ok_or_else(|| bad("expected 2 or 4 numbers"))?;
        *slot = parse_number(token).map_err(bad)?;
        count += 1;
    }
    match count {
        2 => Ok(Point {
            x: numbers[0],
            y: numbers[1],
        }),
        4 => Ok(Point {
            x: (numbers[0] + numbers[2]) / 2.0,
            y: (numbers[1] + numbers[3]) / 2.0,
        }),
        _ => Err(bad("expected 2 or 4 numbers")),
    }
}

/// `123` or `12.5`: digits with at most one dot, no sign, no exponent.
fn parse_number(token: &str) -> Result<f64, &'static str> {
    if token.starts_with('-') {
        return Err("negative coordinate");
    }
    let digits = token.bytes().filter(u8::is_ascii_digit).count();
    let dots = token.bytes().filter(|b| *b == b'.').count();
    if token.len() > MAX_NUMBER_LEN {
        return Err("number too long");
    }
    if digits == 0 || dots > 1 || digits + dots != token.len() {
        return Err("not a number");
    }
    match token.parse::<f64>() {
        Ok(n) if n.is_finite() => Ok(n),
        _ => Err("not a number"),
    }
}
