//! A client's command read as JSON for the rules with a bound on what is
//! built: a 16 MiB array of numbers is 8 million values, some 256 MiB
//! once parsed (32 bytes each), and four connections of a session, or
//! fifty sessions of a tenant, would parse one at once. A message of more
//! than [`MAX_NODES`] values is refused unread (not read in part: a rule
//! must never decide on a command whose deciding field was skipped).
//! Strings cost one value whatever their length (their text is what they
//! cost), so large data goes as one string. The message is forwarded as
//! the client sent it, not as read here.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The most values read of one message.
pub(super) const MAX_NODES: usize = 100_000;

/// Why a message was not read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unread {
    /// Not JSON.
    NotJson,
    /// More than the values allowed.
    TooMany,
}

/// `text` as JSON, if it holds at most `max` values.
pub(super) fn parse(text: &str, max: usize) -> Result<Value, Unread> {
    let left = Cell::new(max);
    let mut de = serde_json::Deserializer::from_str(text);
    let read = Bounded { left: &left }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    match read {
        Ok(v) => Ok(v),
        Err(_) if left.get() == 0 => Err(Unread::TooMany),
        Err(_) => Err(Unread::NotJson),
    }
}

#[derive(Clone, Copy)]
struct Bounded<'a> {
    left: &'a Cell<usize>,
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self.left.get() {
            0 => Err(D::Error::custom("too many values")),
            n => {
                self.left.set(n - 1);
                d.deserialize_any(self)
            }
        }
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let v = map.next_value_seed(self)?;
            fields.insert(k, v);
        }
        Ok(Value::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_messages_read_as_serde_json_reads_them() {
        for text in [
            r#"{"id":1,"method":"Input.dispatchMouseEvent","params":{"type":"mousePressed","x":1.5,"y":-2,"button":"left","clickCount":1}}"#,
            r#"{"id":2,"sessionId":"S","method":"Runtime.evaluate","params":{"expression":"1+1","returnByValue":true,"n":null,"a":[1,[2,{"b":"c"}]]}}"#,
            r#"[1,2,3]"#,
            r#""x""#,
            r#"{"id":18446744073709551615,"big":-9223372036854775808,"f":1e300,"dup":1,"dup":2}"#,
        ] {
            let want: Value = serde_json::from_str(text).unwrap();
            assert_eq!(parse(text, MAX_NODES), Ok(want), "{text}");
        }
        for bad in ["{", "not json", r#"{"a":1} trailing"#, r#"{"a":}"#] {
            assert_eq!(parse(bad, MAX_NODES), Err(Unread::NotJson), "{bad}");
        }
    }

    #[test]
    fn a_message_of_more_values_than_the_budget_is_not_read_at_all() {
        // The deciding field after the bulk: never decided on unread.
        let mut text =
            String::from(r#"{"id":7,"method":"Input.dispatchMouseEvent","params":{"junk":["#);
        text.push_str(&vec!["0"; 1_000_000].join(","));
        text.push_str(r#"],"type":"mousePressed","x":1,"y":2}}"#);
        assert_eq!(parse(&text, MAX_NODES), Err(Unread::TooMany));
        // Nested bulk shares one budget.
        let row = format!("[{}]", vec!["1"; 1000].join(","));
        let nested = format!("[{}]", vec![row; 1000].join(","));
        assert_eq!(parse(&nested, 5_000), Err(Unread::TooMany));
        assert!(parse(&nested, 1_001_001).is_ok());
        // A long string is one value.
        let long = format!(
            r#"{{"id":1,"method":"Runtime.evaluate","params":{{"expression":"{}"}}}}"#,
            "x".repeat(8 << 20)
        );
        assert!(parse(&long, 10).is_ok());
    }
}
