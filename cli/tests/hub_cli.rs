//! `gwhub aggregate` end to end: golden outputs of the shipped examples
//! (regenerate with `GWHUB_BLESS=1 cargo test -p gwhub --test integration hub_cli::`) and the
//! errors of bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NOW: &str = "2025-05-01T12:00:00Z";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn gwhub(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gwhub"))
        .current_dir(dir().join("../hub/runtime"))
        .args(args)
        .output()
        .unwrap()
}

fn golden(name: &str, args: &[&str]) {
    let out = gwhub(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    let got = String::from_utf8(out.stdout).unwrap();
    let path = dir().join("tests/golden").join(name);
    if std::env::var_os("GWHUB_BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with GWHUB_BLESS=1)", path.display()));
    assert_eq!(
        got, want,
        "{name} differs; run with GWHUB_BLESS=1 to accept"
    );
}

fn fails(args: &[&str], wanted: &str) {
    let out = gwhub(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains(wanted),
        "{args:?}: {stderr:?} lacks {wanted:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty());
}

const THREE: [&str; 6] = [
    "--cluster",
    "east=examples/three-clusters/east.yaml",
    "--cluster",
    "west=examples/three-clusters/west.yaml",
    "--cluster",
    "central=examples/three-clusters/central.json",
];

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec!["aggregate", "--now", NOW];
    v.extend(THREE);
    v.extend(extra);
    v
}

#[test]
fn three_clusters() {
    golden("three-clusters.yaml", &with(&[]));
}

#[test]
fn three_clusters_json_order_of_flags_irrelevant() {
    golden("three-clusters.json", &with(&["-o", "json"]));
    let mut reversed = vec!["aggregate", "--now", NOW, "-o", "json"];
    reversed.extend(THREE.chunks(2).rev().flatten());
    let out = gwhub(&reversed);
    let want = std::fs::read_to_string(dir().join("tests/golden/three-clusters.json")).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
}

#[test]
fn three_clusters_onto_hub_gateway() {
    golden(
        "three-clusters-hub.yaml",
        &with(&[
            "-f",
            "examples/three-clusters/hub.yaml",
            "--hostname-address-type",
            "kuadrant.io/MultiClusterHostname",
        ]),
    );
}

#[test]
fn design_doc_example() {
    golden(
        "design-doc.yaml",
        &[
            "aggregate",
            "--now",
            NOW,
            "--cluster",
            "cluster_1=examples/design-doc/cluster_1.yaml",
            "--cluster",
            "cluster_2=examples/design-doc/cluster_2.yaml",
        ],
    );
}

#[test]
fn hub_gateway_without_clusters() {
    golden(
        "no-clusters.yaml",
        &[
            "aggregate",
            "--now",
            NOW,
            "-f",
            "examples/three-clusters/hub.yaml",
        ],
    );
}

/// A file `name` holding `text`, in a directory of its own that is removed
/// when the returned guard is dropped.
fn tmp(name: &str, text: &str) -> Tmp {
    let dir = tempfile::Builder::new()
        .prefix("gwhub-cli-")
        .tempdir()
        .unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    Tmp { _dir: dir, path }
}

/// A [`tmp`] file's path; its directory goes when this is dropped.
struct Tmp {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl std::ops::Deref for Tmp {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for Tmp {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

#[test]
fn gateway_without_status_reports_nothing() {
    let p = tmp(
        "nostatus.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: public, namespace: openshift-ingress}\nspec: {gatewayClassName: x, listeners: []}\n",
    );
    let arg = format!("bare={}", p.display());
    let out = gwhub(&[
        "aggregate",
        "--now",
        NOW,
        "-o",
        "json",
        "--cluster",
        &arg,
        "--cluster",
        "east=examples/three-clusters/east.yaml",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let public = &v["items"][1];
    assert_eq!(public["metadata"]["name"], "public");
    let accepted = &public["status"]["conditions"][0];
    assert_eq!(accepted["type"], "Accepted");
    assert_eq!(accepted["status"], "False");
    assert_eq!(accepted["message"], "bare Accepted not reported");
}

#[test]
fn bad_input() {
    let e = "examples/three-clusters/east.yaml";
    fails(
        &["aggregate", "--cluster", "east"],
        "--cluster \"east\": expected NAME=PATH",
    );
    fails(
        &["aggregate", "--cluster", &format!("={e}")],
        "the cluster name is empty",
    );
    fails(&["aggregate", "--cluster", "east="], "the path is empty");
    fails(
        &[
            "aggregate",
            "--cluster",
            &format!("east={e}"),
            "--cluster",
            &format!("east={e}"),
        ],
        "cluster \"east\" is given twice",
    );
    fails(
        &["aggregate", "--cluster", "east=/nonexistent/east.yaml"],
        "--cluster east: /nonexistent/east.yaml: cannot read",
    );
    fails(&["aggregate"], "nothing to aggregate");
    fails(
        &[
            "aggregate",
            "--cluster",
            &format!("east={e}"),
            "--now",
            "yesterday",
        ],
        "--now: invalid RFC 3339 time",
    );
    fails(
        &[
            "aggregate",
            "--cluster",
            &format!("east={e}"),
            "--hostname-address-type",
            "Hostname",
        ],
        "--hostname-address-type: hostname address type \"Hostname\"",
    );
    let bad = tmp("bad.yaml", "apiVersion: v1\nkind: [unclosed\n");
    fails(
        &["aggregate", "--cluster", &format!("x={}", bad.display())],
        "bad.yaml: invalid YAML",
    );
    let wrong = tmp(
        "wrong.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g}\nstatus: {addresses: [{value: 5}]}\n",
    );
    fails(
        &["aggregate", "--cluster", &format!("x={}", wrong.display())],
        "wrong.yaml: document 1: Gateway g: status.addresses[0].value",
    );
    let alpha = tmp(
        "alpha.yaml",
        "apiVersion: gateway.networking.k8s.io/v1alpha9\nkind: Gateway\nmetadata: {name: g}\n",
    );
    fails(
        &["aggregate", "--cluster", &format!("x={}", alpha.display())],
        "unsupported apiVersion",
    );
    let twice = tmp(
        "twice.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g, namespace: default}\n",
    );
    fails(
        &["aggregate", "--cluster", &format!("x={}", twice.display())],
        "Gateway default/g appears twice",
    );
    fails(
        &["aggregate", "-f", &twice.display().to_string()],
        "hub Gateway default/g appears twice",
    );
    let unnamed = tmp(
        "unnamed.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {}\n",
    );
    fails(
        &[
            "aggregate",
            "--cluster",
            &format!("x={}", unnamed.display()),
        ],
        "Gateway has no metadata.name",
    );
}

#[test]
fn other_kinds_are_ignored() {
    let p = tmp(
        "mixed.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: example.com/v1\nkind: Gateway\nmetadata: {name: other}\n",
    );
    let out = gwhub(&[
        "aggregate",
        "--now",
        NOW,
        "-o",
        "json",
        "--cluster",
        &format!("x={}", Path::new(&p).display()),
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["items"], serde_json::json!([]));
}

/// A cluster's or the hub's Gateway named `name` as one YAML document.
fn doc(name: &str, status: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: ns, generation: 3}}\nspec: {{gatewayClassName: c, listeners: [{{name: http, port: 80, protocol: HTTP}}]}}\nstatus: {status}\n"
    )
}

const PROGRAMMED: &str = "{addresses: [{type: IPAddress, value: 192.0.2.7}], conditions: [{type: Programmed, status: 'True', reason: Programmed, message: up, lastTransitionTime: '2025-05-01T11:00:00Z', observedGeneration: 3}], listeners: [{name: http, attachedRoutes: 1, supportedKinds: [], conditions: []}]}";

/// Many Gateways read document by document (multi-document YAML) or
/// element by element (a JSON List), in different orders, give the same
/// bytes, in namespace/name order; with and without hub Gateways.
#[test]
fn gateways_stream_in_any_order_and_come_out_sorted() {
    let n = 12;
    let names = |step: usize| -> Vec<String> {
        (0..n)
            .map(|i| format!("gw-{:02}", (i * step + 5) % n))
            .collect()
    };
    let yaml = |step: usize, status: &str| {
        names(step)
            .iter()
            .map(|g| doc(g, status))
            .collect::<Vec<_>>()
            .join("---\n")
    };
    let json = |step: usize, status: &str| {
        let items: Vec<serde_json::Value> = names(step)
            .iter()
            .map(|g| serde_norway::from_str(&doc(g, status)).unwrap())
            .collect();
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
    };
    let east_yaml = tmp("stream-east.yaml", &yaml(5, PROGRAMMED));
    let east_json = tmp("stream-east.json", &json(7, PROGRAMMED));
    let west = tmp("stream-west.yaml", &yaml(11, "{}"));
    let hub_yaml = tmp("stream-hub.yaml", &yaml(7, "{}"));
    let hub_json = tmp("stream-hub.json", &json(5, "{}"));
    for format in ["yaml", "json"] {
        for hub in [None, Some((&hub_yaml, &hub_json))] {
            let run = |east: &Path, hub: Option<&Path>| {
                let east = format!("east={}", east.display());
                let west = format!("west={}", west.display());
                let mut args = vec!["aggregate", "--now", NOW, "-o", format];
                args.extend(["--cluster", &east, "--cluster", &west]);
                let hub = hub.map(|h| h.display().to_string());
                if let Some(h) = &hub {
                    args.extend(["-f", h]);
                }
                let out = gwhub(&args);
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                out.stdout
            };
            let from_yaml = run(&east_yaml, hub.map(|h| h.0.as_path()));
            assert_eq!(
                from_yaml,
                run(&east_json, hub.map(|h| h.1.as_path())),
                "{format}"
            );
            let v: serde_json::Value = if format == "json" {
                serde_json::from_slice(&from_yaml).unwrap()
            } else {
                serde_norway::from_slice(&from_yaml).unwrap()
            };
            let items = v["items"].as_array().unwrap();
            let got: Vec<&str> = items
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap())
                .collect();
            let mut want = names(1);
            want.sort();
            assert_eq!(got, want);
            // Every item carries east's report (its address, per cluster).
            for i in items {
                assert_eq!(
                    i["status"]["addresses"][0]["value"], "east/192.0.2.7",
                    "{}",
                    i["metadata"]["name"]
                );
            }
        }
    }
}

/// A bad document in the middle of a cluster's or the hub's stream stops
/// the command before anything is written, naming the file and document.
#[test]
fn a_bad_document_in_the_middle_is_named() {
    let good = |i: usize| doc(&format!("gw-{i}"), PROGRAMMED);
    let cases = [
        (
            "kind: [unclosed\n".to_owned(),
            vec!["mid.yaml: invalid YAML", "(document 3)"],
        ),
        (
            doc("gw-2", "{addresses: [{value: 5}]}"),
            vec!["mid.yaml: document 3: Gateway ns/gw-2: status.addresses[0].value"],
        ),
        (
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {}\n".to_owned(),
            vec!["mid.yaml: document 3: Gateway has no metadata.name"],
        ),
    ];
    let fine = tmp(
        "mid-fine.yaml",
        &(0..5).map(good).collect::<Vec<_>>().join("---\n"),
    );
    for (bad, needles) in cases {
        let mut docs: Vec<String> = (0..5).map(good).collect();
        docs[2] = bad;
        let p = tmp("mid.yaml", &docs.join("---\n"));
        let cluster = format!("east={}", p.display());
        for n in &needles {
            fails(&["aggregate", "--cluster", &cluster], n);
        }
        fails(&["aggregate", "--cluster", &cluster], "--cluster east: ");
        let fine = format!("east={}", fine.display());
        let hub = p.display().to_string();
        for n in &needles {
            fails(&["aggregate", "--cluster", &fine, "-f", &hub], n);
        }
    }
}

/// `--metrics-listen` on an address another socket holds: `gwhub serve`
/// exits 1 naming the address (the admin server binds at start-up, after
/// the listeners), rather than serving without its metrics and probes.
#[test]
fn a_metrics_address_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = gwhub(&[
        "serve",
        "--no-kube",
        "--insecure",
        "--listen",
        "127.0.0.1:0",
        "--dashboard-listen",
        "127.0.0.1:0",
        "--metrics-listen",
        &addr,
    ]);
    // The hub's start-up lines come first; the error is the last line.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("error: cannot serve metrics on {addr}: ")),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
