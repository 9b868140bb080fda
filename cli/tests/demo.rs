//! `gwhub demo` end to end: the built binary runs the hub and its simulated
//! agents over real loopback gRPC (ephemeral ports, so tests run in
//! parallel), every run bounded by a timeout.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ANY_PORTS: [&str; 6] = [
    "--listen",
    "127.0.0.1:0",
    "--dashboard-listen",
    "127.0.0.1:0",
    "--web-listen",
    "127.0.0.1:0",
];

/// `gwhub demo` on ephemeral ports unless `args` names them.
fn spawn(args: &[&str]) -> Child {
    let ports = if args.iter().any(|a| a.ends_with("listen")) {
        &[][..]
    } else {
        &ANY_PORTS[..]
    };
    Command::new(env!("CARGO_BIN_EXE_gwhub"))
        .arg("demo")
        .args(ports)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for the child, killing it after `limit`.
fn wait(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gwhub demo did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs to completion; returns (status, stdout, stderr).
fn run(args: &[&str], limit: Duration) -> (ExitStatus, String, String) {
    let mut child = spawn(args);
    // Drain both pipes in threads so a full pipe never blocks the child.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).unwrap();
        s
    });
    let status = wait(&mut child, limit);
    (status, out.join().unwrap(), err.join().unwrap())
}

#[test]
fn once_prints_the_complete_aggregate() {
    let (status, out, err) = run(&["--once"], Duration::from_secs(60));
    assert!(status.success(), "{err}");
    assert!(out.starts_with("apiVersion: v1\nitems:\n"), "{out}");
    assert!(out.contains("kind: List"), "{out}");
    for (cluster, ip) in [
        ("east", "203.0.113.10"),
        ("west", "203.0.113.11"),
        ("central", "203.0.113.12"),
    ] {
        assert!(out.contains(&format!("value: {cluster}/{ip}")), "{out}");
        for listener in ["apps-http", "apps-https"] {
            assert!(
                out.contains(&format!("name: {cluster}.{listener}\n")),
                "{cluster}.{listener} missing:\n{out}"
            );
        }
    }
    // `internal` runs on east and west only.
    assert!(out.contains("value: east/198.51.100.10"), "{out}");
    assert!(out.contains("value: west/198.51.100.11"), "{out}");
    assert!(!out.contains("central/198.51.100"), "{out}");
    assert!(out.contains("name: east.http\n") && !out.contains("name: central.http\n"));
    assert_eq!(
        out.matches("type: kuadrant.io/MultiClusterIPAddress")
            .count(),
        5,
        "{out}"
    );
    for line in [
        "message: LoadBalancerReady is True in all 3 clusters",
        "message: Programmed is True in all 3 clusters",
        "message: Accepted is True in all 2 clusters",
        "message: Aggregated the status of 3 clusters",
        "message: Aggregated the status of 2 clusters",
        "type: kuadrant.io/MultiClusterAggregated",
        "reason: NoFailedZones",
        "name: default-gateway",
        "name: internal",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
    assert!(!out.contains("status: 'False'"), "{out}");
    assert!(!err.contains("ERROR") && !err.contains("panicked"), "{err}");
}

#[test]
fn once_with_more_clusters() {
    let (status, out, err) = run(&["--once", "--clusters", "5"], Duration::from_secs(60));
    assert!(status.success(), "{err}");
    for c in ["east", "west", "central", "cluster-4", "cluster-5"] {
        assert!(out.contains(&format!("- {c}\n")), "{c} missing:\n{out}");
        assert!(out.contains(&format!("name: {c}.apps-http\n")), "{out}");
    }
    assert!(out.contains("value: cluster-5/203.0.113.14"), "{out}");
    assert!(out.contains("Aggregated the status of 5 clusters"), "{out}");
}

#[test]
fn live_view_shows_changes_and_exits_after_duration() {
    let (status, out, err) = run(
        &["--duration", "8s", "--interval", "1s"],
        Duration::from_secs(60),
    );
    assert!(status.success(), "{err}");
    assert!(
        !out.contains('\x1b'),
        "no ANSI when stdout is a pipe:\n{out}"
    );
    assert!(out.contains("gwhub demo: a hub and 3 simulated clusters (east, west, central)"));
    assert!(out.contains("--server http://127.0.0.1:"), "{out}");
    assert!(
        out.contains("describe gateway openshift-ingress/default-gateway"),
        "{out}"
    );
    let header = out
        .lines()
        .find(|l| l.starts_with("TIME"))
        .unwrap_or_else(|| panic!("no table header:\n{out}"));
    for col in [
        "GATEWAY",
        "CLUSTERS",
        "ADDRESSES",
        "PROGRAMMED",
        "LB-READY",
        "AGGREGATED",
    ] {
        assert!(header.contains(col), "{header}");
    }
    assert!(
        out.contains("* east: load balancer lost its address 203.0.113.10"),
        "{out}"
    );
    // The banner names the web page's address.
    let web = out
        .lines()
        .find(|l| l.starts_with("  Web page"))
        .unwrap_or_else(|| panic!("no web page line:\n{out}"));
    assert!(web.contains("http://127.0.0.1:"), "{web}");
    // The loss reaches the aggregate: a row with east's address gone and
    // Programmed/LoadBalancerReady False.
    let after = out
        .split("* east: load balancer lost its address")
        .nth(1)
        .unwrap();
    let row = after
        .lines()
        .find(|l| l.contains("openshift-ingress/default-gateway"))
        .unwrap_or_else(|| panic!("no row after the change:\n{out}"));
    let cells: Vec<_> = row.split_whitespace().collect();
    assert_eq!(&cells[2..7], ["3", "2", "True", "False", "False"], "{row}");
    assert!(out.contains("* west: DNS zone demo-public failed"), "{out}");
    // Fleet DNS, a dry run: the records follow the clusters. All three
    // before east's load balancer goes, then east left out, saying why.
    let before = out
        .split("* east: load balancer lost its address")
        .next()
        .unwrap();
    assert!(
        before.contains(
            "DNS *.gwapi.apps.demo.example.com A=203.0.113.10,203.0.113.11,203.0.113.12\n"
        ),
        "{out}"
    );
    assert!(
        after.lines().any(|l| l.ends_with(
            "DNS *.gwapi.apps.demo.example.com A=203.0.113.11,203.0.113.12   (left out: east rule 2 LoadBalancerNotReady)"
        )),
        "{out}"
    );
    assert!(
        out.contains(" get dns "),
        "the banner names get dns:\n{out}"
    );
    assert!(!err.contains("ERROR") && !err.contains("panicked"), "{err}");
}

/// Ctrl-C and SIGTERM end the live demo with exit 0.
#[cfg(unix)]
#[test]
fn signals_stop_cleanly() {
    for signal in ["-TERM", "-INT"] {
        let mut child = spawn(&["--interval", "1s"]);
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("openshift-ingress/default-gateway") {
                    let _ = tx.send(());
                }
            }
        });
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            panic!("no table row within 30s");
        }
        let sent = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = wait(&mut child, Duration::from_secs(20));
        assert!(status.success(), "{signal}: {status:?}");
    }
}

#[test]
fn bad_flags_are_refused() {
    for (args, wanted) in [
        (&["--clusters", "0"][..], "--clusters"),
        (&["--interval", "0s"][..], "longer than zero"),
        (&["--once", "--duration", "1s"][..], "cannot be used with"),
    ] {
        let (status, _, err) = run(args, Duration::from_secs(30));
        assert!(!status.success(), "{args:?}");
        assert!(err.contains(wanted), "{args:?}: {err}");
    }
}

#[test]
fn a_taken_port_says_what_to_do() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (status, _, err) = run(
        &[
            "--once",
            "--listen",
            "127.0.0.1:0",
            "--dashboard-listen",
            &addr,
            "--web-listen",
            "127.0.0.1:0",
        ],
        Duration::from_secs(30),
    );
    assert!(!status.success());
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert!(err.contains("--listen 127.0.0.1:0"), "{err}");
}
