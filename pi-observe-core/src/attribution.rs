//! Who caused the work: the attribution keys (`userId`, `orgId`, …) a scope carries.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Who caused the work: `userId`, `orgId`, `teamId`, `projectId`, … (any string keys).
///
/// Cheap to clone (one `Arc`). Merging makes a new map; inner keys shadow outer ones.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Attribution(Option<Arc<BTreeMap<String, String>>>);

impl Attribution {
    /// The empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// This context plus `key = value` (replacing an existing value).
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let map = Arc::make_mut(self.0.get_or_insert_with(Default::default));
        map.insert(key.into(), value.into());
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.as_ref()?.get(key).map(String::as_str)
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().flat_map(|map| map.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |m| m.len())
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `self` with `inner`'s entries added; `inner` wins on equal keys.
    pub fn merged(&self, inner: &Attribution) -> Attribution {
        match (&self.0, &inner.0) {
            (None, _) => inner.clone(),
            (_, None) => self.clone(),
            (Some(outer), Some(inner)) => {
                let mut map = BTreeMap::clone(outer);
                map.extend(inner.iter().map(|(k, v)| (k.clone(), v.clone())));
                Attribution(Some(Arc::new(map)))
            }
        }
    }
}

impl fmt::Debug for Attribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl From<&Attribution> for Attribution {
    fn from(a: &Attribution) -> Self {
        a.clone()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Attribution {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let map: BTreeMap<String, String> = iter.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        if map.is_empty() { Attribution(None) } else { Attribution(Some(Arc::new(map))) }
    }
}
