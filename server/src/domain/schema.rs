//! Schema pieces for rules that no single field's schema can say: which of
//! an input's alternative fields must be given. Used as schemars
//! `transform`s on the input types, next to the checks they describe.

use schemars::Schema;
use serde_json::{Map, Value, json};

/// A field and the JSON type it has when given.
pub type Field = (&'static str, &'static str);

/// Absent or `null` (serde reads both as `None`).
fn unset() -> Value {
    json!({ "nullable": true, "enum": [null] })
}

/// One `oneOf` branch: the fields of `given` present and not null, every
/// other field of `all` absent or null.
fn branch(given: &[Field], all: &[&[Field]]) -> Value {
    let mut properties = Map::new();
    for group in all {
        for (name, _) in *group {
            properties.insert((*name).into(), unset());
        }
    }
    for (name, ty) in given {
        properties.insert((*name).into(), json!({ "type": ty }));
    }
    let mut b = json!({ "properties": properties });
    if !given.is_empty() {
        b["required"] = given.iter().map(|(n, _)| json!(n)).collect();
    }
    b
}

/// Adds `oneOf`: exactly one of `groups` is given (all of its fields), the
/// others absent or null; with `or_none`, also none at all.
pub fn one_group_of(schema: &mut Schema, groups: &[&[Field]], or_none: bool) {
    let mut branches: Vec<Value> = groups.iter().map(|g| branch(g, groups)).collect();
    if or_none {
        branches.push(branch(&[], groups));
    }
    one_of(schema, branches);
}

/// Adds `oneOf` with `branches`, each made a whole object schema: the
/// type's own properties, with the branch's narrowing each one it names
/// (a given field loses `null`), so that a generated client gets one
/// complete type per branch.
pub fn one_of(schema: &mut Schema, branches: Vec<Value>) {
    let base = schema
        .get("properties")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let closed = schema.get("additionalProperties").cloned();
    let whole: Vec<Value> = branches
        .into_iter()
        .map(|mut b| {
            let mut properties = base.as_object().cloned().unwrap_or_default();
            if let Some(narrow) = b.get("properties").and_then(Value::as_object) {
                for (name, n) in narrow {
                    properties.insert(name.clone(), narrowed(properties.get(name), n));
                }
            }
            for p in properties.values_mut() {
                openapi_nullable(p);
                // A reference alone, without its description and default
                // (which become `allOf: [{$ref}]` in OpenAPI 3.0):
                // openapi-python-client resolves only a plain one inside a
                // branch.
                if let Some(r) = p.get("$ref").cloned() {
                    *p = json!({ "$ref": r });
                }
            }
            b["type"] = json!("object");
            b["properties"] = Value::Object(properties);
            if let Some(c) = &closed {
                b["additionalProperties"] = c.clone();
            }
            b
        })
        .collect();
    schema.insert("oneOf".into(), Value::Array(whole));
}

/// `type: [T, "null"]` as OpenAPI 3.0 says it (`type: T, nullable: true`);
/// the generator's own pass does not reach into these copies.
fn openapi_nullable(v: &mut Value) {
    let Some(Value::Array(types)) = v.get("type") else {
        return;
    };
    let rest: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
    if let ([one], true) = (rest.as_slice(), rest.len() < types.len()) {
        v["type"] = one.clone();
        v["nullable"] = json!(true);
    }
}

/// A field's schema as a branch narrows it.
fn narrowed(base: Option<&Value>, narrow: &Value) -> Value {
    let Some(Value::Object(base)) = base else {
        return narrow.clone();
    };
    if base.contains_key("$ref") || narrow.get("enum").is_some_and(|e| e == &json!([null])) {
        return narrow.clone();
    }
    let mut out = base.clone();
    out.remove("nullable");
    for (k, v) in narrow.as_object().into_iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_branch_names_its_fields_and_unsets_the_others() {
        let mut s = Schema::default();
        one_group_of(
            &mut s,
            &[&[("selector", "string")], &[("ref", "string")]],
            true,
        );
        let one_of = s.get("oneOf").unwrap().as_array().unwrap();
        assert_eq!(one_of.len(), 3);
        assert_eq!(one_of[0]["required"], json!(["selector"]));
        assert_eq!(one_of[0]["properties"]["selector"]["type"], "string");
        assert_eq!(one_of[0]["properties"]["ref"]["enum"], json!([null]));
        assert!(one_of[2].get("required").is_none());
        assert_eq!(one_of[2]["type"], "object");
    }
}
