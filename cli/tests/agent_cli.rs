//! `gwhub-agent compute` as users run it: bad input exits non-zero with a
//! message naming the file and the problem; nothing panics.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gwhub-agent"))
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../spoke-agent/examples")
        .join(name)
}

struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("gwhub-agent-cli-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn compute(args: &[&Path], extra: &[&str]) -> Output {
    let mut cmd = bin();
    cmd.arg("compute");
    for a in args {
        cmd.arg("-f").arg(a);
    }
    cmd.args(extra).output().unwrap()
}

/// Asserts exit code 1, `error: ` prefix, and that every `needle` appears.
fn assert_fails(out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{n:?} not in {stderr}");
    }
    assert!(out.stdout.is_empty());
}

/// The aws-healthy example's files except the Gateway, plus `gateway`.
fn with_gateway(tmp: &Tmp, gateway: &str) -> Vec<PathBuf> {
    let dir = example("aws-healthy");
    vec![
        dir.join("gatewayclass.yaml"),
        dir.join("cluster-config.yaml"),
        dir.join("service.yaml"),
        tmp.file("gw.yaml", gateway),
    ]
}

fn paths(v: &[PathBuf]) -> Vec<&Path> {
    v.iter().map(PathBuf::as_path).collect()
}

#[test]
fn malformed_yaml() {
    let tmp = Tmp::new("yaml");
    let f = tmp.file("bad.yaml", "apiVersion: v1\nkind: [unclosed\n");
    assert_fails(&compute(&[&f], &[]), &["bad.yaml: invalid YAML"]);
}

#[test]
fn malformed_json() {
    let tmp = Tmp::new("json");
    let f = tmp.file("bad.json", "{\"apiVersion\": \"v1\", ");
    assert_fails(&compute(&[&f], &[]), &["bad.json: invalid JSON"]);
}

#[test]
fn gateway_without_class_name() {
    let tmp = Tmp::new("noclass");
    let files = with_gateway(
        &tmp,
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g, namespace: openshift-ingress}\nspec:\n  listeners: []\n",
    );
    assert_fails(
        &compute(&paths(&files), &[]),
        &[
            "gw.yaml: document 1: Gateway openshift-ingress/g",
            "gatewayClassName",
        ],
    );
}

#[test]
fn object_without_kind() {
    let tmp = Tmp::new("nokind");
    let f = tmp.file("k.yaml", "apiVersion: v1\nmetadata: {name: x}\n");
    assert_fails(
        &compute(&[&f], &[]),
        &["k.yaml: document 1: object has no kind"],
    );
}

#[test]
fn unknown_api_version_of_a_needed_kind() {
    let tmp = Tmp::new("apiversion");
    let files = with_gateway(
        &tmp,
        "apiVersion: gateway.networking.k8s.io/v2\nkind: Gateway\nmetadata: {name: g, namespace: openshift-ingress}\nspec: {gatewayClassName: openshift-default, listeners: []}\n",
    );
    assert_fails(
        &compute(&paths(&files), &[]),
        &[
            "gw.yaml",
            "unsupported apiVersion \"gateway.networking.k8s.io/v2\"",
        ],
    );
    let f = tmp.file(
        "rec.yaml",
        "apiVersion: ingress.operator.openshift.io/v2\nkind: DNSRecord\nmetadata: {name: r, namespace: openshift-ingress}\nspec: {dnsName: a.b}\n",
    );
    assert_fails(&compute(&[&f], &[]), &["rec.yaml", "DNSRecord", "v2"]);
}

#[test]
fn non_existent_file() {
    let out = compute(&[Path::new("/nonexistent/gateways.yaml")], &[]);
    assert_fails(&out, &["/nonexistent/gateways.yaml: cannot read"]);
}

#[test]
fn missing_cluster_dns_config() {
    let dir = example("aws-healthy");
    let out = compute(
        &[&dir.join("gatewayclass.yaml"), &dir.join("gateway.yaml")],
        &[],
    );
    assert_fails(&out, &["missing dnses.config.openshift.io/cluster:"]);
    // The Infrastructure object is not read: a DNS config alone is enough.
    let tmp = Tmp::new("noinfra");
    let dns_only = tmp.file(
        "dns.yaml",
        "apiVersion: config.openshift.io/v1\nkind: DNS\nmetadata: {name: cluster}\nspec: {publicZone: {id: Z1}}\n",
    );
    let out = compute(
        &[
            &dir.join("gatewayclass.yaml"),
            &dir.join("gateway.yaml"),
            &dns_only,
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("DNSManaged"));
}

#[test]
fn same_object_twice_is_an_error() {
    let dir = example("aws-healthy");
    let out = compute(&[&dir, &dir.join("service.yaml")], &[]);
    assert_fails(&out, &["service.yaml", "given twice"]);
}

#[test]
fn bad_flags_exit_non_zero() {
    let dir = example("aws-healthy");
    for extra in [&["--now", "yesterday"][..], &["-o", "xml"][..]] {
        let out = compute(&[&dir], extra);
        assert!(!out.status.success());
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
    let out = bin().arg("compute").output().unwrap();
    assert!(!out.status.success(), "-f is required");
}

#[test]
fn json_output_is_a_v1_list_and_managed_fields_are_stripped() {
    let out = compute(
        &[&example("aws-healthy")],
        &["-o", "json", "--now", "2026-01-12T10:00:00Z"],
    );
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["kind"], "List");
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert!(items[0]["metadata"].get("managedFields").is_none());
    assert_eq!(
        items[0]["metadata"]["uid"],
        "5b0e8f0a-6c2d-4f47-a3a1-2f7f3c9b1e01"
    );
    assert_eq!(
        items[0]["status"]["addresses"][0]["value"],
        "a1b2c3d4e5f6-1234567890.us-east-1.elb.amazonaws.com"
    );
}

#[test]
fn scope_flags_select_gateways() {
    let dir = example("lb-pending");
    // Default scope: only openshift-ingress/internal (team-a is elsewhere,
    // the networking.istio.io Gateway and the ConfigMap are ignored).
    let out = compute(&[&dir], &["-o", "json", "--now", "2026-01-12T10:00:00Z"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<_> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["metadata"]["namespace"].as_str().unwrap(),
                i["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(names, ["openshift-ingress/internal"]);
    let out = compute(&[&dir], &["-o", "json", "--namespace", "team-a"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["items"][0]["metadata"]["name"], "team-a");
    assert_eq!(
        v["items"][0]["apiVersion"],
        "gateway.networking.k8s.io/v1beta1"
    );
    let out = compute(
        &[&dir],
        &["-o", "json", "--controller-name", "example.com/other"],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["items"], serde_json::json!([]));
}

#[test]
fn condition_limit_is_a_warning_not_an_error() {
    let dir = example("condition-limit");
    let out = compute(&[&dir], &["--now", "2026-01-12T10:00:00Z"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(
            "warning: Gateway openshift-ingress/crowded: no room for condition LoadBalancerReady"
        ),
        "{stderr}"
    );
}

/// The aws-healthy Gateway under `name`, as one YAML document.
fn gateway_named(name: &str) -> String {
    let text = std::fs::read_to_string(example("aws-healthy").join("gateway.yaml")).unwrap();
    text.replacen("  name: default-gateway\n", &format!("  name: {name}\n"), 1)
}

/// The aws-healthy cluster objects without its Gateway.
fn cluster_files() -> Vec<PathBuf> {
    let dir = example("aws-healthy");
    [
        "gatewayclass.yaml",
        "cluster-config.yaml",
        "service.yaml",
        "dnsrecords.yaml",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect()
}

/// Many Gateways read document by document (a multi-document YAML file)
/// or element by element (a JSON List), each in its own order, come out
/// in namespace/name order, the same bytes either way.
#[test]
fn gateways_stream_in_any_order_and_come_out_sorted() {
    let tmp = Tmp::new("stream");
    let n = 12;
    let names = |step: usize| -> Vec<String> {
        (0..n)
            .map(|i| format!("gw-{:02}", (i * step + 5) % n))
            .collect()
    };
    let docs: Vec<String> = names(5).iter().map(|g| gateway_named(g)).collect();
    let yaml = tmp.file("gateways.yaml", &docs.join("---\n"));
    let items: Vec<serde_json::Value> = names(7)
        .iter()
        .map(|g| serde_norway::from_str(&gateway_named(g)).unwrap())
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let json = tmp.file("gateways.json", &list.to_string());
    for format in ["yaml", "json"] {
        let run = |gateways: &Path| {
            let mut files = cluster_files();
            files.push(gateways.to_path_buf());
            let out = compute(
                &paths(&files),
                &["-o", format, "--now", "2026-01-12T10:00:00Z"],
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        };
        let from_yaml = run(&yaml);
        assert_eq!(from_yaml, run(&json), "{format}");
        let v: serde_json::Value = if format == "json" {
            serde_json::from_slice(&from_yaml).unwrap()
        } else {
            serde_norway::from_slice(&from_yaml).unwrap()
        };
        let got: Vec<&str> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        let mut want = names(1);
        want.sort();
        assert_eq!(got, want);
    }
}

/// A bad document in the middle of a stream stops the command before
/// anything is written, naming the file and the document.
#[test]
fn a_bad_document_in_the_middle_is_named() {
    let tmp = Tmp::new("middle");
    let mut docs: Vec<String> = (0..5).map(|i| gateway_named(&format!("gw-{i}"))).collect();
    let cases = [
        (
            "apiVersion: v1\nkind: [unclosed\n".to_owned(),
            vec!["gw.yaml: invalid YAML", "(document 3)"],
        ),
        (
            gateway_named("gw-2").replace("  gatewayClassName: openshift-default\n", ""),
            vec![
                "gw.yaml: document 3: Gateway openshift-ingress/gw-2",
                "gatewayClassName",
            ],
        ),
        (
            "apiVersion: v1\nmetadata: {name: x}\n".to_owned(),
            vec!["gw.yaml: document 3: object has no kind"],
        ),
    ];
    for (bad, needles) in cases {
        docs[2] = bad;
        let mut files = cluster_files();
        files.push(tmp.file("gw.yaml", &docs.join("---\n")));
        assert_fails(&compute(&paths(&files), &[]), &needles);
    }
    // In a JSON stream, the value's place in the stream.
    let good = serde_json::to_string(
        &serde_norway::from_str::<serde_json::Value>(&gateway_named("gw-0")).unwrap(),
    )
    .unwrap();
    let stream = format!(
        "{good}\n{}\n{{\"apiVersion\": \n",
        good.replace("gw-0", "gw-1")
    );
    let mut files = cluster_files();
    files.push(tmp.file("gw.json", &stream));
    assert_fails(
        &compute(&paths(&files), &[]),
        &["gw.json: invalid JSON", "(document 3)"],
    );
}
