use serde::Deserialize;

use super::*;

#[test]
fn deeply_nested_flow_yaml_is_refused_before_parsing() {
    // 200 KB of nesting took seconds of CPU in the YAML parser.
    let deep = format!("a: {}{}", "[".repeat(100_000), "]".repeat(100_000));
    let e = parse_str("deep.yaml", &deep).unwrap_err();
    assert!(
        matches!(
            e,
            ManifestError::TooDeep {
                max: MAX_NESTING,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("deep.yaml"), "{e}");
    let json = format!("{}{}", "{\"a\":".repeat(200), "}".repeat(200));
    assert!(matches!(
        parse_str("deep.json", &json),
        Err(ManifestError::TooDeep { .. })
    ));
    // Ordinary nesting is fine.
    let ok = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\ndata: {{a: {}x{}}}\n",
        "[".repeat(20),
        "]".repeat(20)
    );
    assert!(parse_str("ok.yaml", &ok).is_ok());
}

#[test]
fn brackets_hidden_in_quotes_do_not_bypass_the_nesting_bound() {
    // Each level closes a bracket inside a string: the parser nests.
    let level = |q: &str| format!("[ {q}]{q}, ");
    for hidden in [
        format!("a: {}", level("\"").repeat(50_000)),
        format!("a: {}", level("'").repeat(50_000)),
    ] {
        assert!(
            matches!(
                parse_str("hidden.yaml", &hidden),
                Err(ManifestError::TooDeep { .. })
            ),
            "{}",
            &hidden[..40]
        );
    }
    // Escapes inside quotes do not end them; comments are skipped.
    let escaped = format!("a: {}", "[ \"\\\"]\", ".repeat(200));
    assert!(matches!(
        parse_str("escaped.yaml", &escaped),
        Err(ManifestError::TooDeep { .. })
    ));
    let quoted = format!("a: {}", "[ 'it''s ]', ".repeat(200));
    assert!(matches!(
        parse_str("quoted.yaml", &quoted),
        Err(ManifestError::TooDeep { .. })
    ));
    let comment = format!("a: {}", "[ # ]\n".repeat(200));
    assert!(matches!(
        parse_str("comment.yaml", &comment),
        Err(ManifestError::TooDeep { .. })
    ));
}

#[test]
fn brackets_that_are_text_do_not_count() {
    let brackets = "[{".repeat(MAX_NESTING);
    let ok = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x # {brackets}\n  annotations:\n    q: \"{brackets}\"\n    s: '{brackets}'\ndata:\n  script: |\n    {brackets}\n\n    echo {brackets}\n  folded: >-\n    {brackets}\n  after: [x]\n"
    );
    let objects = parse_str("ok.yaml", &ok).unwrap();
    assert_eq!(objects.len(), 1);
    // A block scalar ends where the indentation does: what follows counts.
    let after = format!("data:\n  script: |\n    x\n  deep: {}x\n", "[".repeat(200));
    assert!(matches!(
        parse_str("after.yaml", &after),
        Err(ManifestError::TooDeep { .. })
    ));
}

#[cfg(unix)]
#[test]
fn only_regular_files_are_read() {
    let e = read_paths(&["/dev/zero"]).unwrap_err();
    assert!(
        matches!(
            e,
            ManifestError::NotRegular {
                what: "a device",
                ..
            }
        ),
        "{e}"
    );
    let fifo = std::env::temp_dir().join(format!("gwhub-fifo-{}.yaml", std::process::id()));
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    if made {
        // Refused without opening it (opening a FIFO blocks).
        let e = read_paths(&[&fifo]).unwrap_err();
        let _ = std::fs::remove_file(&fifo);
        assert!(
            matches!(e, ManifestError::NotRegular { what: "a FIFO", .. }),
            "{e}"
        );
        assert!(e.to_string().contains("- for standard input"), "{e}");
    }
}

#[test]
fn multi_document_yaml_and_lists() {
    let text = "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Event, metadata: {name: e}}\n\
                    - {apiVersion: v1, kind: Event, metadata: {name: f}}\n---\n";
    let objs = parse_str("f.yaml", text).unwrap();
    assert_eq!(objs.len(), 3);
    assert_eq!(objs[0].name(), "ns/a");
    assert_eq!(objs[2].at.to_string(), "f.yaml: document 2, items[1]");
}

#[test]
fn json_list_and_stream() {
    let text = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}}]}
        {"apiVersion":"v1","kind":"Service","metadata":{"name":"b"}}"#;
    let objs = parse_str("f.json", text).unwrap();
    assert_eq!(objs.len(), 2);
}

#[test]
fn errors_name_file_and_problem() {
    let e = parse_str("bad.yaml", "apiVersion: v1\nkind: [unclosed\n").unwrap_err();
    assert!(e.to_string().starts_with("bad.yaml: invalid YAML"), "{e}");
    let e = parse_str("bad.json", "{\"apiVersion\": ").unwrap_err();
    assert!(e.to_string().starts_with("bad.json: invalid JSON"), "{e}");
    let e = parse_str("k.yaml", "apiVersion: v1\nmetadata: {name: x}\n").unwrap_err();
    assert_eq!(e.to_string(), "k.yaml: document 1: object has no kind");
    let e = parse_str("s.yaml", "just a string\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "s.yaml: document 1: expected a Kubernetes object, found a string"
    );
}

#[test]
fn typed_parse_names_field_path() {
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct S {
        spec: Spec,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Spec {
        port: i32,
    }
    let objs = parse_str(
        "t.yaml",
        "apiVersion: v1\nkind: Thing\nmetadata: {name: n}\nspec: {port: eighty}\n",
    )
    .unwrap();
    let e = objs[0].parse::<S>().unwrap_err().to_string();
    assert!(
        e.starts_with("t.yaml: document 1: Thing n: spec.port: invalid type"),
        "{e}"
    );
}

#[test]
fn api_version_check() {
    let objs = parse_str(
        "v.yaml",
        "apiVersion: x/v9\nkind: Gateway\nmetadata: {name: g}\n",
    )
    .unwrap();
    let e = objs[0]
        .expect_api_version(&["x/v1"])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "v.yaml: document 1: Gateway g: unsupported apiVersion \"x/v9\" (supported: x/v1)"
    );
}

/// The old reader: the whole text through one YAML parser.
fn whole_text(file: &str, text: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (i, de) in serde_norway::Deserializer::from_str(text).enumerate() {
        let v = Value::deserialize(de).unwrap();
        let at = Location {
            file: file.to_owned(),
            document: i + 1,
            item: None,
        };
        collect(v, at, &mut |o: Object| {
            out.push((o.at.to_string(), o.value));
            Ok::<_, ManifestError>(())
        })
        .unwrap();
    }
    out
}

fn streamed(file: &str, text: &str) -> Vec<(String, Value)> {
    parse_str(file, text)
        .unwrap()
        .into_iter()
        .map(|o| (o.at.to_string(), o.value))
        .collect()
}

#[test]
fn yaml_document_by_document_reads_what_the_whole_text_does() {
    let cm = |i: usize| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\ndata:\n  script: |\n    ---not a marker\n     --- nor this\n  q: \"a\n    --- b\"\n  'k': '...x'\n"
        )
    };
    let mut text = String::from("\u{feff}# leading comment\n\n%YAML 1.2\n---\n");
    for i in 0..300 {
        text.push_str(&cm(i));
        text.push_str(match i % 5 {
            0 => "---\n",
            1 => "--- # marker with a comment\n",
            2 => "...\n# between\n---\n",
            3 => "---\n---\n",
            _ => "---\t\n",
        });
    }
    text.push_str("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Event, metadata: {name: e}}\n---\n");
    text.push_str("--- {apiVersion: v1, kind: Service, metadata: {name: flow}}\n...\n");
    let want = whole_text("m.yaml", &text);
    assert_eq!(want.len(), 302);
    assert_eq!(streamed("m.yaml", &text), want);
    // An error's line is the file's, not the document's.
    let bad = format!("{}{}", cm(0), "---\napiVersion: v1\nkind: [unclosed\n");
    let whole = serde_norway::Deserializer::from_str(&bad)
        .map(|de| Value::deserialize(de).map(|_| ()))
        .find_map(Result::err)
        .unwrap()
        .to_string();
    let e = parse_str("bad.yaml", &bad).unwrap_err().to_string();
    assert_eq!(e, format!("bad.yaml: invalid YAML: {whole} (document 2)"));
    assert!(e.contains("at line 14 column 7"), "{e}");
    // Nesting is still bounded, at the file's offset.
    let deep = format!("{}---\na: {}\n", cm(0), "[".repeat(200));
    match parse_str("deep.yaml", &deep).unwrap_err() {
        ManifestError::TooDeep { offset, .. } => {
            assert_eq!(offset, deep.find('[').unwrap() + MAX_NESTING)
        }
        e => panic!("{e}"),
    }
}

#[test]
fn json_arrays_and_lists_element_by_element() {
    let svc = |i: usize| {
        format!(r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"s{i}"}}}}"#)
    };
    let items: Vec<String> = (0..50).map(svc).collect();
    let array = format!("\n  [{}]\n", items.join(","));
    let objs = parse_str("a.json", &array).unwrap();
    assert_eq!(objs.len(), 50);
    assert_eq!(objs[49].at.to_string(), "a.json: document 50");
    // kubectl's order: items before kind.
    let list = format!(
        r#"{{"apiVersion":"v1","items":[{}],"kind":"List","metadata":{{}}}}
            {}"#,
        items.join(","),
        svc(99)
    );
    let objs = parse_str("l.json", &list).unwrap();
    assert_eq!(objs.len(), 51);
    assert_eq!(objs[3].at.to_string(), "l.json: document 1, items[3]");
    assert_eq!(objs[50].at.to_string(), "l.json: document 2");
    // An object with items of its own is refused when its kind is not
    // a List (kind after items), kept as is when the kind came first.
    let e = parse_str("x.json", r#"{"apiVersion":"v1","items":[],"kind":"Thing"}"#)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "x.json: document 1: Thing: items are only read in a List (a kind ending in List)"
    );
    let objs = parse_str(
        "y.json",
        r#"{"apiVersion":"v1","kind":"Thing","items":[1]}"#,
    )
    .unwrap();
    assert_eq!(objs[0].value["items"], serde_json::json!([1]));
    let e = parse_str("z.json", r#"{"apiVersion":"v1","items":[]}"#)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "z.json: document 1: object has no kind");
    let e = parse_str("n.json", r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"List","items":[]}]}"#)
            .unwrap_err()
            .to_string();
    assert_eq!(e, "n.json: document 1, items[0]: List nested inside a List");
    // An array is a list of objects only when it is all there is.
    let e = parse_str("t.json", &format!("[{}] {}", svc(1), svc(2)))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "t.json: document 1: expected a Kubernetes object, found a list"
    );
    let e = parse_str("u.json", &format!("{} [{}]", svc(1), svc(2)))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "u.json: document 2: expected a Kubernetes object, found a list"
    );
}

/// A reader that hands out `parts` one per read and counts reads.
struct Parts {
    parts: std::collections::VecDeque<Vec<u8>>,
    reads: std::rc::Rc<std::cell::Cell<usize>>,
}

impl Read for Parts {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(mut part) = self.parts.pop_front() else {
            return Ok(0);
        };
        self.reads.set(self.reads.get() + 1);
        let n = part.len().min(buf.len());
        buf[..n].copy_from_slice(&part[..n]);
        if n < part.len() {
            self.parts.push_front(part.split_off(n));
        }
        Ok(n)
    }
}

/// Memory follows the largest document, not the input: the first
/// object is handed on long before the reader is exhausted.
#[test]
fn objects_are_handed_on_before_the_input_ends() {
    let big = "x".repeat(20_000);
    let svc = |i: usize| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"s{i}","annotations":{{"a":"{big}"}}}}}}"#
        )
    };
    let yaml_doc = |i: usize| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: s{i}\n  annotations:\n    a: {big}\n---\n"
        )
    };
    let inputs: Vec<(&str, Vec<String>)> = vec![
        ("y.yaml", (0..100).map(yaml_doc).collect()),
        ("s.json", (0..100).map(|i| svc(i) + "\n").collect()),
        ("a.json", {
            let mut p: Vec<String> = (0..100).map(|i| svc(i) + ",").collect();
            p[0].insert(0, '[');
            p[99] = svc(99) + "]";
            p
        }),
        ("l.json", {
            let mut p: Vec<String> = (0..100).map(|i| svc(i) + ",").collect();
            p[0].insert_str(0, r#"{"apiVersion":"v1","items":["#);
            p[99] = svc(99) + r#"],"kind":"List"}"#;
            p
        }),
    ];
    for (file, parts) in inputs {
        let reads = std::rc::Rc::new(std::cell::Cell::new(0));
        let reader = Parts {
            parts: parts.iter().map(|p| p.clone().into_bytes()).collect(),
            reads: reads.clone(),
        };
        let mut at_first = None;
        let mut names = Vec::new();
        parse_reader(file, reader, &mut |o: Object| {
            at_first.get_or_insert(reads.get());
            names.push(o.name());
            Ok::<_, ManifestError>(())
        })
        .unwrap();
        assert_eq!(names.len(), 100, "{file}");
        assert_eq!(names[99], "s99", "{file}");
        let at_first = at_first.unwrap();
        assert!(
            at_first < 10 && reads.get() >= 100,
            "{file}: first object after {at_first} of {} reads",
            reads.get()
        );
    }
    // The reader's own errors stop it where they are.
    let reads = std::rc::Rc::new(std::cell::Cell::new(0));
    let reader = Parts {
        parts: vec![
            yaml_doc(0).into_bytes(),
            b"kind: [unclosed\n".to_vec(),
            yaml_doc(1).into_bytes(),
        ]
        .into(),
        reads: reads.clone(),
    };
    let mut seen = 0;
    let e = parse_reader("e.yaml", reader, &mut |_| {
        seen += 1;
        Ok::<_, ManifestError>(())
    })
    .unwrap_err();
    assert_eq!(seen, 1);
    assert!(e.to_string().starts_with("e.yaml: invalid YAML"), "{e}");
}

#[test]
fn missing_file() {
    let e = read_paths(&["/nonexistent/gw.yaml"])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/nonexistent/gw.yaml: cannot read:"), "{e}");
}
