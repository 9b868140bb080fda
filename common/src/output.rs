//! Output in the shape `kubectl get -o yaml|json` prints, so results can be
//! fed back into `gwhub-agent compute` or `gwhub aggregate`.

use std::io::{self, Write};

use serde_json::{Value, json};

/// `-o yaml` (default) or `-o json`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    #[default]
    Yaml,
    Json,
}

/// An `-o` value that is neither `yaml` nor `json`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown output format {0:?} (use yaml or json)")]
pub struct UnknownOutputFormat(pub String);

impl std::str::FromStr for OutputFormat {
    type Err = UnknownOutputFormat;
    fn from_str(s: &str) -> Result<Self, UnknownOutputFormat> {
        match s {
            "yaml" => Ok(Self::Yaml),
            "json" => Ok(Self::Json),
            other => Err(UnknownOutputFormat(other.to_owned())),
        }
    }
}

/// Renders `items` as a `v1` `List`.
pub fn render_list(items: Vec<Value>, format: OutputFormat) -> String {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    render_object(&list, format)
}

/// Renders one object as `kubectl get <kind> <name> -o yaml|json` does; in
/// a stream (`-w`), YAML documents are separated by `---` lines.
pub fn render_object(object: &Value, format: OutputFormat) -> String {
    let list = object;
    match format {
        OutputFormat::Json => {
            let mut s = serde_json::to_string_pretty(&list).unwrap_or_default();
            s.push('\n');
            s
        }
        OutputFormat::Yaml => serde_norway::to_string(&list).unwrap_or_default(),
    }
}

/// Writes a `v1` `List` item by item, byte for byte what [`render_list`]
/// renders for the same items, so a command can hand each result on as it
/// is computed: memory follows the largest item, not the list.
pub struct ListWriter<W: Write> {
    out: W,
    format: OutputFormat,
    items: usize,
}

impl<W: Write> ListWriter<W> {
    pub fn new(out: W, format: OutputFormat) -> Self {
        Self {
            out,
            format,
            items: 0,
        }
    }

    /// How many items were written.
    pub fn len(&self) -> usize {
        self.items
    }

    /// Whether no item was written yet.
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Writes one item.
    pub fn item(&mut self, item: &Value) -> io::Result<()> {
        match self.format {
            OutputFormat::Json => {
                let text = serde_json::to_string_pretty(item).map_err(io::Error::other)?;
                let head: &[u8] = if self.items == 0 {
                    b"{\n  \"apiVersion\": \"v1\",\n  \"items\": [\n"
                } else {
                    b",\n"
                };
                self.out.write_all(head)?;
                // JSON strings escape their newlines: every line is the item's.
                for (i, line) in text.split('\n').enumerate() {
                    if i > 0 {
                        self.out.write_all(b"\n")?;
                    }
                    self.out.write_all(b"    ")?;
                    self.out.write_all(line.as_bytes())?;
                }
            }
            OutputFormat::Yaml => {
                // A sequence in a mapping is not indented: the one-item
                // sequence is the item as the List's `items` holds it.
                let text = serde_norway::to_string(std::slice::from_ref(item))
                    .map_err(io::Error::other)?;
                if self.items == 0 {
                    self.out.write_all(b"apiVersion: v1\nitems:\n")?;
                }
                self.out.write_all(text.as_bytes())?;
            }
        }
        self.items += 1;
        Ok(())
    }

    /// Ends the List and hands back the writer, flushed.
    pub fn finish(mut self) -> io::Result<W> {
        let tail: &[u8] = match (self.format, self.items) {
            (OutputFormat::Json, 0) => {
                b"{\n  \"apiVersion\": \"v1\",\n  \"items\": [],\n  \"kind\": \"List\"\n}\n"
            }
            (OutputFormat::Json, _) => b"\n  ],\n  \"kind\": \"List\"\n}\n",
            (OutputFormat::Yaml, 0) => b"apiVersion: v1\nitems: []\nkind: List\n",
            (OutputFormat::Yaml, _) => b"kind: List\n",
        };
        self.out.write_all(tail)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn streamed(items: &[Value], format: OutputFormat) -> String {
        let mut w = ListWriter::new(Vec::new(), format);
        for i in items {
            w.item(i).unwrap();
        }
        String::from_utf8(w.finish().unwrap()).unwrap()
    }

    #[test]
    fn the_streamed_list_is_the_rendered_one() {
        let gateway = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "g", "namespace": "ns", "annotations": {"a": "two\nlines\n", "b": ""}},
            "spec": {"listeners": [], "gatewayClassName": "c"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "message": "- not a list\n---\n..."}],
                       "listeners": [{"name": "l", "conditions": []}], "other": {}},
        });
        let cases: Vec<Vec<Value>> = vec![
            vec![],
            vec![gateway.clone()],
            vec![
                gateway.clone(),
                json!({}),
                json!([]),
                json!(null),
                json!("x"),
                json!(1.5),
            ],
            vec![json!({"a": [[1, 2], [], {"b": [{}]}]}), gateway],
        ];
        for items in cases {
            for format in [OutputFormat::Yaml, OutputFormat::Json] {
                assert_eq!(
                    streamed(&items, format),
                    render_list(items.clone(), format),
                    "{format:?} {items:?}"
                );
            }
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[ -~\n\t]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z:\\- ]{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_items_stream_as_they_render(items in prop::collection::vec(arb_json(), 0..4)) {
            for format in [OutputFormat::Yaml, OutputFormat::Json] {
                prop_assert_eq!(streamed(&items, format), render_list(items.clone(), format));
            }
        }
    }
}
