//! Results put down in the order they are read and handed back in key
//! order, so `compute` and `aggregate` can print a sorted List without
//! holding it: each value goes to a file (compact JSON), memory keeps only
//! its key, a caller's small tag and where it lies (about 16 bytes plus the
//! key and tag per value), and one value is read back at a time.

use std::io::{self, Read, Seek, SeekFrom, Write};

use serde_json::Value;

/// Why the spool failed: its file could not be written or read back.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("temporary file: {0}")]
    Io(#[from] io::Error),
    #[error("temporary file: a value read back is not JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Values under keys `K` with tags `T`, in a file `F` (a temporary file,
/// or memory for the pure entry points).
pub(crate) struct Spool<K, T, F> {
    file: F,
    end: u64,
    index: Vec<(K, T, u64, u64)>,
}

impl<K: Ord, T> Spool<K, T, std::fs::File> {
    /// A spool in an unnamed temporary file (under `$TMPDIR`), removed when
    /// the spool is dropped.
    pub(crate) fn temporary() -> Result<Self, SpoolError> {
        Ok(Self::new(tempfile::tempfile()?))
    }
}

impl<K: Ord, T, F: Read + Write + Seek> Spool<K, T, F> {
    pub(crate) fn new(file: F) -> Self {
        Self {
            file,
            end: 0,
            index: Vec::new(),
        }
    }

    /// Puts `value` down under `key`.
    pub(crate) fn push(&mut self, key: K, tag: T, value: &Value) -> Result<(), SpoolError> {
        let bytes = serde_json::to_vec(value)?;
        self.file.seek(SeekFrom::Start(self.end))?;
        self.file.write_all(&bytes)?;
        let len = bytes.len() as u64;
        self.index.push((key, tag, self.end, len));
        self.end += len;
        Ok(())
    }

    /// The keys and tags put down so far, in the order they were.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&K, &T)> {
        self.index.iter().map(|(k, t, _, _)| (k, t))
    }

    /// Drops the values whose key and tag fail `keep` (unread).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K, &T) -> bool) {
        self.index.retain(|(k, t, _, _)| keep(k, t));
    }

    /// Hands every value to `each` by key order (equal keys in the order
    /// they were put down), one value in memory at a time.
    pub(crate) fn drain_sorted<E: From<SpoolError>>(
        mut self,
        mut each: impl FnMut(K, T, Value) -> Result<(), E>,
    ) -> Result<(), E> {
        self.index.sort_by(|a, b| a.0.cmp(&b.0));
        self.file.flush().map_err(SpoolError::from)?;
        let mut buf = Vec::new();
        for (key, tag, offset, len) in std::mem::take(&mut self.index) {
            buf.clear();
            self.file
                .seek(SeekFrom::Start(offset))
                .map_err(SpoolError::from)?;
            (&mut self.file)
                .take(len)
                .read_to_end(&mut buf)
                .map_err(SpoolError::from)?;
            let value = serde_json::from_slice(&buf).map_err(SpoolError::from)?;
            each(key, tag, value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_come_back_by_key_and_whole() {
        for file in [false, true] {
            let values = [
                ("c", json!({"a": [1, 2.5, "x\ny"], "b": null})),
                ("a", json!("just a string")),
                ("b", json!({})),
                ("a2", json!([{"deep": {"er": true}}])),
            ];
            let mut out = Vec::new();
            let mut collect = |k: &str, t: usize, v: Value| {
                out.push((k.to_owned(), t, v));
                Ok::<_, SpoolError>(())
            };
            if file {
                let mut s = Spool::temporary().unwrap();
                for (i, (k, v)) in values.iter().enumerate() {
                    s.push(*k, i, v).unwrap();
                }
                s.retain(|k, _| *k != "b");
                s.drain_sorted(&mut collect).unwrap();
            } else {
                let mut s = Spool::new(io::Cursor::new(Vec::new()));
                for (i, (k, v)) in values.iter().enumerate() {
                    s.push(*k, i, v).unwrap();
                }
                s.retain(|k, _| *k != "b");
                s.drain_sorted(&mut collect).unwrap();
            }
            let keys: Vec<_> = out.iter().map(|(k, t, _)| (k.as_str(), *t)).collect();
            assert_eq!(keys, [("a", 1), ("a2", 3), ("c", 0)]);
            assert_eq!(out[2].2, values[0].1);
            assert_eq!(out[1].2, values[3].1);
        }
    }
}
