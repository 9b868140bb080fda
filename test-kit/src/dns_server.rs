//! Real authoritative servers for the field tests (fleet DNS's rfc2136
//! output, here and in dns-rfc2136's own tests): Debian's BIND 9 (`named`)
//! and Knot DNS (`knotd`), each started on a free loopback port with a zone
//! `fleet.test.` and TSIG keys of the test's own, in a directory of its own;
//! answers checked with `dig`, foreign records made with `nsupdate`, as an
//! operator would. scripts/dns-servers.sh installs them. A server is killed
//! when its guard is dropped, so a failing test leaves nothing running.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const ZONE: &str = "fleet.test";
const NAMED: &str = "/usr/sbin/named";
const KNOTD: &str = "/usr/sbin/knotd";
const TSIG_KEYGEN: &str = "/usr/sbin/tsig-keygen";
const DIG: &str = "/usr/bin/dig";
const NSUPDATE: &str = "/usr/bin/nsupdate";

/// How long a server may take to answer after its start (generous: CI
/// runs everything at once on two cores).
const READY: Duration = Duration::from_secs(60);

/// Whether the servers and tools are installed; if not, says that `test` is
/// skipped, or fails it under `GWHUB_REQUIRE_DNS=1` (scripts/test.sh).
pub fn available(test: &str) -> bool {
    let missing: Vec<&str> = [NAMED, KNOTD, TSIG_KEYGEN, DIG, NSUPDATE]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let strict = std::env::var("GWHUB_REQUIRE_DNS").is_ok_and(|v| v == "1");
    assert!(
        !strict,
        "{test}: missing {missing:?}: run scripts/dns-servers.sh"
    );
    eprintln!("SKIPPED {test}: missing {missing:?} (scripts/dns-servers.sh installs them)");
    false
}

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bind,
    Knot,
}

/// A TSIG key as `tsig-keygen` makes it.
#[derive(Debug, Clone)]
pub struct Key {
    pub name: String,
    pub algorithm: String,
    pub secret: String,
    /// The whole `key "name" { ... };` clause.
    pub clause: String,
}

impl Key {
    /// A fresh key from `tsig-keygen -a algorithm name`.
    pub fn generate(name: &str, algorithm: &str) -> Key {
        let out = Command::new(TSIG_KEYGEN)
            .args(["-a", algorithm, name])
            .output()
            .expect("run tsig-keygen");
        assert!(out.status.success(), "tsig-keygen: {out:?}");
        let clause = String::from_utf8(out.stdout).unwrap();
        let secret = clause
            .lines()
            .find_map(|l| l.trim().strip_prefix("secret \""))
            .and_then(|s| s.split('"').next())
            .expect("a secret in tsig-keygen's output")
            .to_owned();
        Key {
            name: name.to_owned(),
            algorithm: algorithm.to_owned(),
            secret,
            clause,
        }
    }

    /// `nsupdate -y`'s argument.
    fn y(&self) -> String {
        format!("{}:{}:{}", self.algorithm, self.name, self.secret)
    }
}

/// Keys a server knows: `update` may update the zone, `known` only exist.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    pub update: Vec<Key>,
    pub known: Vec<Key>,
}

impl Keys {
    pub fn updating(keys: &[&Key]) -> Keys {
        Keys {
            update: keys.iter().map(|k| (*k).clone()).collect(),
            known: Vec::new(),
        }
    }
}

/// A running server; killed (and its directory removed) when dropped.
pub struct Server {
    pub kind: Kind,
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Server {
    /// Starts `kind` with the zone and `keys`, and waits until it answers.
    pub fn start(kind: Kind, keys: &Keys) -> Server {
        let dir = std::env::temp_dir().join(format!(
            "gwhub-dns-{}-{}-{}",
            match kind {
                Kind::Bind => "bind",
                Kind::Knot => "knot",
            },
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("fleet.test.zone"), ZONE_FILE).unwrap();
        let mut s = Server {
            kind,
            port: free_port(),
            dir,
            child: None,
        };
        s.run(keys);
        s
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Stops the server (SIGKILL, as a crash would); its data stays.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the server and starts it again on the same port and data with
    /// `keys` (a key rotation as an operator does it).
    pub fn restart(&mut self, keys: &Keys) {
        self.stop();
        self.run(keys);
    }

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn run(&mut self, keys: &Keys) {
        let (program, conf) = match self.kind {
            Kind::Bind => (NAMED, self.bind_conf(keys)),
            Kind::Knot => (KNOTD, self.knot_conf(keys)),
        };
        let conf_path = self.dir.join("server.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .unwrap();
        let mut cmd = Command::new(program);
        match self.kind {
            // -g: foreground, log to stderr, run as the caller (no -u).
            Kind::Bind => cmd.args(["-g", "-c"]),
            Kind::Knot => cmd.arg("-c"),
        };
        let child = cmd
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {program}: {e}"));
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY;
        loop {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                panic!(
                    "{:?} exited ({status}) before answering:\n{}",
                    self.kind,
                    self.log_text()
                );
            }
            // Over TCP, as the client speaks.
            let out = self.dig_raw(&[ZONE, "SOA", "+short", "+tcp", "+time=1", "+tries=1"]);
            if out.status.success() && !out.stdout.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{:?} on port {} did not answer within {READY:?}:\n{}",
                self.kind,
                self.port,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }

    fn bind_conf(&self, keys: &Keys) -> String {
        let dir = self.dir.display();
        let mut conf = String::new();
        for k in keys.update.iter().chain(&keys.known) {
            conf.push_str(&k.clause);
        }
        let allow: String = keys
            .update
            .iter()
            .map(|k| format!("key \"{}\"; ", k.name))
            .collect();
        let allow = if allow.is_empty() {
            "none; ".to_owned()
        } else {
            allow
        };
        conf.push_str(&format!(
            r#"
options {{
    directory "{dir}";
    pid-file none;
    session-keyfile none;
    listen-on port {port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    dnssec-validation no;
}};
controls {{ }};
zone "{ZONE}" {{
    type primary;
    file "{dir}/fleet.test.zone";
    allow-update {{ {allow}}};
}};
"#,
            port = self.port
        ));
        conf
    }

    fn knot_conf(&self, keys: &Keys) -> String {
        let dir = self.dir.display();
        let all: Vec<&Key> = keys.update.iter().chain(&keys.known).collect();
        let mut conf = format!(
            r#"server:
    rundir: "{dir}"
    listen: 127.0.0.1@{port}
log:
  - target: stderr
    any: info
database:
    storage: "{dir}"
control:
    listen: "{dir}/knot.sock"
"#,
            port = self.port
        );
        if !all.is_empty() {
            conf.push_str("key:\n");
            for k in &all {
                conf.push_str(&format!(
                    "  - id: {}\n    algorithm: {}\n    secret: {}\n",
                    k.name, k.algorithm, k.secret
                ));
            }
        }
        let names: Vec<&str> = keys.update.iter().map(|k| k.name.as_str()).collect();
        let acl = if names.is_empty() {
            String::new()
        } else {
            conf.push_str(&format!(
                "acl:\n  - id: update\n    key: [{}]\n    action: update\n",
                names.join(", ")
            ));
            "    acl: update\n".to_owned()
        };
        conf.push_str(&format!(
            "zone:\n  - domain: {ZONE}\n    storage: \"{dir}\"\n    file: \"fleet.test.zone\"\n{acl}"
        ));
        conf
    }

    fn dig_raw(&self, args: &[&str]) -> std::process::Output {
        Command::new(DIG)
            .arg("@127.0.0.1")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("run dig")
    }

    /// `dig +short NAME TYPE`: the answers, sorted (TXT without quotes).
    pub fn dig(&self, name: &str, rtype: &str) -> Vec<String> {
        let out = self.dig_raw(&[name, rtype, "+short", "+time=5", "+tries=2"]);
        assert!(out.status.success(), "dig {name} {rtype}: {out:?}");
        let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                if rtype == "TXT" {
                    l.split('"').skip(1).step_by(2).collect()
                } else {
                    l.trim().to_owned()
                }
            })
            .filter(|l: &String| !l.is_empty())
            .collect();
        v.sort();
        v
    }

    /// The status dig shows for `NAME TYPE`: NOERROR, NXDOMAIN, ...
    pub fn status(&self, name: &str, rtype: &str) -> String {
        let out = self.dig_raw(&[name, rtype, "+time=5", "+tries=2"]);
        let text = String::from_utf8_lossy(&out.stdout);
        text.split("status: ")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .unwrap_or_else(|| panic!("no status in dig's output: {text}"))
            .to_owned()
    }

    /// Sends an update with `nsupdate -y` (as another owner or an operator
    /// would), asserting it succeeded.
    pub fn nsupdate(&self, key: &Key, updates: &[&str]) {
        let mut script = format!("server 127.0.0.1 {}\nzone {ZONE}\n", self.port);
        for u in updates {
            script.push_str(&format!("update {u}\n"));
        }
        script.push_str("send\n");
        let mut child = Command::new(NSUPDATE)
            .args(["-y", &key.y()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run nsupdate");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "nsupdate {updates:?}: {out:?}\n{}",
            self.log_text()
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!(
                "{:?} log ({}):\n{}",
                self.kind,
                self.dir.display(),
                self.log_text()
            );
        }
    }
}

const ZONE_FILE: &str = "$TTL 300
@ IN SOA ns1.fleet.test. hostmaster.fleet.test. 1 3600 600 86400 30
@ IN NS ns1.fleet.test.
ns1 IN A 127.0.0.1
";

/// A loopback port free for both TCP and UDP right now (a name server
/// binds both), picked as [`crate::procs::try_free_port`] picks.
pub fn free_port() -> u16 {
    crate::procs::try_free_port_where(|port| {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        TcpListener::bind(addr).is_ok() && UdpSocket::bind(addr).is_ok()
    })
    .expect("a loopback port free for TCP and UDP")
}
