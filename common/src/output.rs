//! Output in the shape `kubectl get -o yaml|json` prints, so results can be
//! fed back into `gwhub-agent compute` or `gwhub aggregate`.

use serde_json::{Value, json};

/// `-o yaml` (default) or `-o json`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    #[default]
    Yaml,
    Json,
}

impl std::str::FromStr for OutputFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "yaml" => Ok(Self::Yaml),
            "json" => Ok(Self::Json),
            other => Err(format!(
                "unknown output format {other:?} (use yaml or json)"
            )),
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
