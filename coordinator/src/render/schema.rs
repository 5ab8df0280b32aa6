//! `schema_version`: the version of the JSON documents the CLI prints, stamped at the
//! top level of every one (`run --json` and its `--dump` run.json, `sweep --json`,
//! `explain --json`, `topology --json`, `status --json`, `calibrate --json` and each
//! line of `bench-model --json`).

use serde::Serialize;
use serde_json::Value;

/// The version of the CLI's JSON documents. It starts at 1 and goes up by one whenever
/// a key of any document is renamed or removed, or a value changes its meaning or unit,
/// so that a script can refuse a document it does not understand. Adding a key does
/// not change it: readers ignore keys they do not know.
pub const SCHEMA_VERSION: u32 = 1;

/// The key the version is stamped under.
pub const SCHEMA_VERSION_KEY: &str = "schema_version";

/// `document` with [`SCHEMA_VERSION`] added at its top level. Every document the CLI
/// prints is a JSON object; anything else is returned as it is.
pub fn versioned(mut document: Value) -> Value {
    if let Value::Object(fields) = &mut document {
        fields.insert(SCHEMA_VERSION_KEY.to_owned(), Value::from(SCHEMA_VERSION));
    }
    document
}

/// `value` as a JSON document with [`SCHEMA_VERSION`] at its top level.
pub fn versioned_json(value: &impl Serialize) -> serde_json::Result<Value> {
    serde_json::to_value(value).map(versioned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_get_the_version_and_keep_their_keys() {
        let document = versioned(json!({ "time_us": { "median": 2.5 }, "verified": true }));
        assert_eq!(document["schema_version"], 1);
        assert_eq!(document["time_us"]["median"], 2.5);
        assert_eq!(document["verified"], true);
        assert_eq!(document.as_object().map(|o| o.len()), Some(3));
    }

    #[test]
    fn structs_are_versioned_through_their_json() {
        #[derive(Serialize)]
        struct Fit {
            ts_us: f64,
        }
        let document = versioned_json(&Fit { ts_us: 41.5 }).unwrap();
        assert_eq!(document, json!({ "schema_version": SCHEMA_VERSION, "ts_us": 41.5 }));
    }

    #[test]
    fn what_is_not_an_object_is_left_alone() {
        assert_eq!(versioned(json!([1, 2])), json!([1, 2]));
        assert_eq!(versioned(Value::Null), Value::Null);
    }
}
