//! A real Prometheus (Debian's `prometheus`, installed by
//! scripts/prometheus.sh) for the monitoring tests: started on scrape
//! targets with the rules shipped in manifests/monitoring/ (taken from the
//! PrometheusRule as scripts/check-monitoring.sh takes them), scraping and
//! evaluating every second, and asked over its HTTP API.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::procs::{Process, free_port};

/// Where Debian's package puts the server.
pub(crate) const PROMETHEUS: &str = "/usr/bin/prometheus";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether Prometheus is installed; if not, says that `test` is skipped,
/// or fails it under `GWHUB_REQUIRE_PROMETHEUS=1` (scripts/test.sh).
pub fn available(test: &str) -> bool {
    if Path::new(PROMETHEUS).exists() {
        return true;
    }
    let strict = std::env::var("GWHUB_REQUIRE_PROMETHEUS").is_ok_and(|v| v == "1");
    assert!(
        !strict,
        "{test}: no {PROMETHEUS}: run scripts/prometheus.sh"
    );
    eprintln!("SKIPPED {test}: no {PROMETHEUS} (scripts/prometheus.sh installs it)");
    false
}

/// The PrometheusRule's `spec` as a Prometheus rule file: everything after
/// its last top-level key, `spec:`, two spaces less indented.
pub(crate) fn shipped_rules() -> String {
    let path = repo().join("manifests/monitoring/prometheusrule.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let (_, spec) = text.split_once("\nspec:\n").expect("a top-level spec:");
    spec.lines()
        .map(|l| l.strip_prefix("  ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A scrape target: its job, its `pod` label and its `host:port`.
pub struct Target<'a> {
    pub job: &'a str,
    pub pod: &'a str,
    pub addr: String,
}

/// A running Prometheus; stopped when dropped.
pub struct Prometheus {
    pub port: u16,
    _process: Process,
}

impl Prometheus {
    /// Starts Prometheus in `dir` scraping `targets` (labelled `namespace:
    /// gwhub-system` and their `pod`, as a PodMonitor would) every second,
    /// with the shipped rules evaluated every second.
    pub fn start(dir: &Path, targets: &[Target<'_>]) -> Prometheus {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("rules.yaml"), shipped_rules()).unwrap();
        let mut config = [
            "global:",
            "  scrape_interval: 1s",
            "  evaluation_interval: 1s",
            "rule_files:",
            "  - rules.yaml",
            "scrape_configs:",
        ]
        .map(str::to_owned)
        .to_vec();
        for t in targets {
            config.extend([
                format!("  - job_name: {}-{}", t.job, t.pod),
                "    static_configs:".to_owned(),
                format!("      - targets: ['{}']", t.addr),
                "        labels:".to_owned(),
                "          namespace: gwhub-system".to_owned(),
                format!("          pod: {}", t.pod),
            ]);
        }
        std::fs::write(dir.join("prometheus.yml"), config.join("\n") + "\n").unwrap();
        let port = free_port();
        let process = Process(
            Command::new(PROMETHEUS)
                .arg(format!(
                    "--config.file={}",
                    dir.join("prometheus.yml").display()
                ))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
                .spawn()
                .unwrap(),
        );
        Prometheus {
            port,
            _process: process,
        }
    }

    /// `GET path` on the HTTP API: the JSON answer, or `None` while it
    /// does not answer.
    pub async fn api(&self, path: &str) -> Option<serde_json::Value> {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).await.ok()?;
        let (_, body) = text.split_once("\r\n\r\n")?;
        serde_json::from_str(body).ok()
    }

    /// The series an instant query of `expr` returns (empty on an error).
    pub async fn query(&self, expr: &str) -> Vec<serde_json::Value> {
        let path = format!("/api/v1/query?query={}", percent_encode(expr));
        self.api(&path)
            .await
            .and_then(|v| v["data"]["result"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The alerts, pending and firing: (alert name, `cluster` label, state).
    pub async fn alerts(&self) -> Vec<(String, String, String)> {
        let Some(v) = self.api("/api/v1/alerts").await else {
            return Vec::new();
        };
        let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        v["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    s(&a["labels"]["alertname"]),
                    s(&a["labels"]["cluster"]),
                    s(&a["state"]),
                )
            })
            .collect()
    }
}

/// `s` for a URL's query: every byte but the unreserved ones escaped.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
