//! `extensions`: upstream's list of extension paths, or an object with that list (`paths`) and
//! what a listed extension that fails to load does (`onLoadError`).
//!
//! ```json
//! { "extensions": ["./gate.ts"] }
//! { "extensions": { "paths": ["./gate.ts"], "onLoadError": "warn" } }
//! ```

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The `extensions` setting in either form.
#[derive(Debug, Clone, Default)]
pub(crate) struct Extensions {
    pub paths: Vec<String>,
    pub on_load_error: Option<OnLoadError>,
}

/// What a listed extension that cannot be loaded does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnLoadError {
    /// The run stops (exit 2) naming it; the interactive mode shows an error to dismiss. A gate
    /// is never silently absent.
    #[default]
    Stop,
    /// One line on stderr and the run goes on without it (upstream's behaviour).
    Warn,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Section {
    #[serde(default)]
    paths: Vec<String>,
    on_load_error: Option<OnLoadError>,
}

impl<'de> Deserialize<'de> for Extensions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(deserializer)? {
            Value::Array(items) => {
                let paths = serde_json::from_value(Value::Array(items))
                    .map_err(|e| D::Error::custom(format!("a list of extension paths: {e}")))?;
                Ok(Extensions { paths, on_load_error: None })
            }
            object @ Value::Object(_) => {
                let Section { paths, on_load_error } = serde_json::from_value(object).map_err(D::Error::custom)?;
                Ok(Extensions { paths, on_load_error })
            }
            other => Err(D::Error::custom(format!(
                "expected a list of extension paths or {{\"paths\": […], \"onLoadError\": \"stop\"|\"warn\"}}, found {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_or_an_object_and_a_clear_error_otherwise() {
        let list: Extensions = serde_json::from_str(r#"["a.ts"]"#).unwrap();
        assert_eq!((list.paths, list.on_load_error), (vec!["a.ts".to_owned()], None));
        let object: Extensions = serde_json::from_str(r#"{"paths": ["b.ts"], "onLoadError": "warn"}"#).unwrap();
        assert_eq!((object.paths, object.on_load_error), (vec!["b.ts".to_owned()], Some(OnLoadError::Warn)));
        let bad = serde_json::from_str::<Extensions>(r#"{"onLoadError": "ignore"}"#).unwrap_err().to_string();
        assert!(bad.contains("ignore") && bad.contains("stop"), "{bad}");
        let bad = serde_json::from_str::<Extensions>("true").unwrap_err().to_string();
        assert!(bad.contains("list of extension paths"), "{bad}");
    }
}
