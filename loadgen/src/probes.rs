//! What the bench reads from `/proc`: a process's memory (RSS and its
//! peak) and CPU time, the kube-apiserver's pid, the machine and its load.
//! A probe that cannot read gives 0 (or "unknown") rather than failing the
//! run: the figures say so.

/// `VmRSS` and `VmHWM` of `pid`, in bytes.
pub(crate) fn rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kib("VmRSS:"), kib("VmHWM:"))
}

pub(crate) fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{cpus} cpus, {model}")
}

/// utime + stime of `pid` in seconds.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) end with ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// The pid of the kube-apiserver serving `port`.
pub(crate) fn apiserver_pid(port: u16) -> Option<u32> {
    let flag = format!("--secure-port={port}");
    std::fs::read_dir("/proc").ok()?.find_map(|e| {
        let e = e.ok()?;
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd);
        (cmd.contains("kube-apiserver") && cmd.split('\0').any(|a| a == flag)).then_some(pid)
    })
}

pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Write requests the API server answered so far, by resource (with
/// `/subresource`), from its own `apiserver_request_total` (every verb
/// that writes: POST, PUT, PATCH, APPLY, DELETE; any response code): what
/// every writer (the hubs' status, store, Lease and liveness writes) cost
/// it, counted where it is paid.
pub(crate) async fn apiserver_writes(
    client: &kube::Client,
) -> Result<std::collections::BTreeMap<String, u64>, crate::error::BenchError> {
    use crate::error::BenchError;
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(BenchError::Http)?;
    let text = client
        .request_text(request)
        .await
        .map_err(BenchError::kube("API server /metrics"))?;
    Ok(write_counts(&text))
}

/// [`apiserver_writes`] of a `/metrics` text.
pub(crate) fn write_counts(text: &str) -> std::collections::BTreeMap<String, u64> {
    let mut counts = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |k: &str| {
            labels.split(',').find_map(|kv| {
                let (key, v) = kv.split_once('=')?;
                (key == k).then(|| v.trim_matches('"').to_owned())
            })
        };
        let verb = label("verb").unwrap_or_default();
        if !matches!(verb.as_str(), "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE") {
            continue;
        }
        let Ok(n) = value.trim().parse::<f64>() else {
            continue;
        };
        let mut kind = label("resource").unwrap_or_default();
        if let Some(sub) = label("subresource").filter(|s| !s.is_empty()) {
            kind = format!("{kind}/{sub}");
        }
        *counts.entry(kind).or_insert(0) += n as u64;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_counted_by_resource_and_subresource() {
        let text = r#"# HELP apiserver_request_total x
apiserver_request_total{code="200",component="apiserver",dry_run="",group="gateway.networking.k8s.io",resource="gateways",scope="resource",subresource="status",verb="APPLY",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="GET",version="v1"} 99
"#;
        let counts = write_counts(text);
        assert_eq!(counts.get("gateways/status"), Some(&7));
        assert_eq!(counts.get("leases"), Some(&4));
        assert_eq!(counts.len(), 2);
    }
}
