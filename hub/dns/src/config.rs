//! Fleet DNS's settings, from `gwhub serve`'s `--dns-*` flags (spec
//! section 8), checked once at start: a bad combination is refused with a
//! message naming the flags ([`DnsConfigError`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use gwhub_dns_rfc2136::{Algorithm, KeyError, KeySource};
use gwhub_dns_rules::{
    CnameRouting, HostnameError, Ownership, OwnershipError, PublishConfig, RecordOptions, WhenNone,
};
use gwhub_hub_rules::aggregate::GatewayKey;

/// `--dns-output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OutputKind {
    /// One external-dns `DNSEndpoint` per (hub Gateway, hostname).
    Dnsendpoint,
    /// RFC 2136 dynamic updates to `--dns-server`.
    Rfc2136,
}

impl OutputKind {
    /// The metrics' `output` label.
    pub fn label(self) -> &'static str {
        match self {
            OutputKind::Dnsendpoint => "dnsendpoint",
            OutputKind::Rfc2136 => "rfc2136",
        }
    }
}

/// `--dns-when-none`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WhenNoneFlag {
    #[default]
    Keep,
    Remove,
}

/// `--dns-cname-routing`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CnameRoutingFlag {
    #[default]
    Simple,
    Weighted,
}

/// The flags as given (the command line fills it).
#[derive(Clone, Debug, Default)]
pub struct DnsFlags {
    pub zones: Vec<String>,
    pub outputs: Vec<OutputKind>,
    pub server: Option<String>,
    pub tsig_key_name: Option<String>,
    pub tsig_secret_file: Option<PathBuf>,
    pub tsig_algorithm: Option<String>,
    pub owner_id: Option<String>,
    pub ttl: Duration,
    pub max_targets: usize,
    pub rise: Duration,
    pub when_none: WhenNoneFlag,
    pub resync: Duration,
    pub cname_routing: CnameRoutingFlag,
    pub dry_run: bool,
    /// `--no-kube`.
    pub no_kube: bool,
}

/// The `rfc2136` output's server and key.
#[derive(Clone, Debug)]
pub struct Rfc2136Config {
    pub server: SocketAddr,
    pub key: KeySource,
    /// One operation's timeout.
    pub timeout: Duration,
}

/// Fleet DNS, on.
#[derive(Clone, Debug)]
pub struct DnsConfig {
    /// `--dns-zone`s, normalised (lower case, no trailing dot).
    pub zones: Vec<String>,
    pub dnsendpoint: bool,
    pub rfc2136: Option<Rfc2136Config>,
    /// `--dns-owner-id`.
    pub owner_id: String,
    pub records: RecordOptions,
    /// `--dns-rise`, `--stale-after`, `--dns-when-none` (coalescing: 250 ms).
    pub publish: PublishConfig,
    /// `--dns-resync`.
    pub resync: Duration,
    /// `--dns-dry-run`.
    pub dry_run: bool,
}

impl DnsConfig {
    /// The outputs written, by their flag values.
    pub fn outputs(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.dnsendpoint {
            out.push(OutputKind::Dnsendpoint.label().to_owned());
        }
        if self.rfc2136.is_some() {
            out.push(OutputKind::Rfc2136.label().to_owned());
        }
        out
    }
}

/// How long one DNS operation may take (connect, send, answer).
pub const RFC2136_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the `--dns-*` flags are refused.
#[derive(Debug, thiserror::Error)]
pub enum DnsConfigError {
    #[error("--dns-zone {zone:?}: {error}")]
    Zone { zone: String, error: HostnameError },
    #[error(
        "--dns-zone is given but no --dns-output (dnsendpoint or rfc2136): say where the records go"
    )]
    NoOutput,
    #[error("{flag} is given but no --dns-zone: fleet DNS is off without a zone")]
    NoZone { flag: &'static str },
    #[error("--dns-output=rfc2136 needs {0}")]
    Rfc2136Needs(&'static str),
    #[error("{0} is for --dns-output=rfc2136, which is not given")]
    OnlyRfc2136(&'static str),
    #[error(
        "--dns-output=dnsendpoint writes DNSEndpoint objects on the management cluster: it cannot be combined with --no-kube"
    )]
    DnsendpointNoKube,
    #[error(
        "without Kubernetes (--no-kube) fleet DNS only computes and shows what it would publish: add --dns-dry-run"
    )]
    NoKube,
    #[error(
        "--dns-cname-routing=weighted is for --dns-output=dnsendpoint only: RFC 2136 has no weighted records"
    )]
    WeightedRfc2136,
    #[error("--dns-server {server:?}: {why}")]
    Server { server: String, why: String },
    #[error("--dns-tsig-algorithm: {0}")]
    Algorithm(KeyError),
    #[error("--dns-tsig-secret-file: {0}")]
    Key(KeyError),
    #[error("--dns-owner-id: {0}")]
    OwnerId(OwnershipError),
    #[error("--dns-ttl {0:?}: must be whole seconds, 1s to 2147483647s")]
    Ttl(Duration),
    #[error("--dns-max-targets must be at least 1")]
    MaxTargets,
    #[error("--dns-output {0} is given twice")]
    TwiceOutput(&'static str),
}

impl DnsFlags {
    /// The checked settings; `Ok(None)`: fleet DNS is off (no zone and no
    /// other `--dns-*` flag that needs one). `namespace`: the hub's, the
    /// default owner id; `stale_after`: `--stale-after`.
    pub fn check(
        &self,
        namespace: &str,
        stale_after: Duration,
    ) -> Result<Option<DnsConfig>, DnsConfigError> {
        if self.zones.is_empty() {
            self.refuse_without_zone()?;
            return Ok(None);
        }
        let zones = self.checked_zones()?;
        let outputs = self.checked_outputs()?;
        let dnsendpoint = outputs.contains(&OutputKind::Dnsendpoint);
        let rfc2136 = self.rfc2136_config(outputs.contains(&OutputKind::Rfc2136))?;
        let owner_id = self
            .owner_id
            .clone()
            .unwrap_or_else(|| namespace.to_owned());
        Ownership::new(&owner_id, GatewayKey::new("ns", "name"))
            .map_err(DnsConfigError::OwnerId)?;
        let ttl = self.ttl;
        if ttl.subsec_nanos() != 0 || ttl.as_secs() == 0 || ttl.as_secs() > i32::MAX as u64 {
            return Err(DnsConfigError::Ttl(ttl));
        }
        if self.max_targets == 0 {
            return Err(DnsConfigError::MaxTargets);
        }
        Ok(Some(DnsConfig {
            zones,
            dnsendpoint,
            rfc2136,
            owner_id,
            records: RecordOptions {
                ttl_seconds: ttl.as_secs() as u32,
                max_targets: self.max_targets,
                cname_routing: match self.cname_routing {
                    CnameRoutingFlag::Simple => CnameRouting::Single,
                    CnameRoutingFlag::Weighted => CnameRouting::Weighted,
                },
            },
            publish: PublishConfig {
                rise_millis: millis(self.rise),
                stale_after_millis: millis(stale_after),
                when_none: match self.when_none {
                    WhenNoneFlag::Keep => WhenNone::Keep,
                    WhenNoneFlag::Remove => WhenNone::Remove,
                },
                ..PublishConfig::default()
            },
            resync: self.resync,
            dry_run: self.dry_run,
        }))
    }

    /// Without a zone fleet DNS is off: refuses a flag that needs one.
    fn refuse_without_zone(&self) -> Result<(), DnsConfigError> {
        let given = [
            (!self.outputs.is_empty(), "--dns-output"),
            (self.server.is_some(), "--dns-server"),
            (self.tsig_key_name.is_some(), "--dns-tsig-key-name"),
            (self.tsig_secret_file.is_some(), "--dns-tsig-secret-file"),
            (self.owner_id.is_some(), "--dns-owner-id"),
            (self.dry_run, "--dns-dry-run"),
        ];
        match given.into_iter().find(|(g, _)| *g) {
            Some((_, flag)) => Err(DnsConfigError::NoZone { flag }),
            None => Ok(()),
        }
    }

    /// The zones, each checked and in its canonical form.
    fn checked_zones(&self) -> Result<Vec<String>, DnsConfigError> {
        let mut zones = Vec::new();
        for z in &self.zones {
            let zone = gwhub_dns_rules::parse_zone(z).map_err(|error| DnsConfigError::Zone {
                zone: z.clone(),
                error,
            })?;
            zones.push(zone.as_str().to_owned());
        }
        Ok(zones)
    }

    /// The outputs (sorted), refused when none is given where one is
    /// needed, one is given twice, or one cannot run without Kubernetes.
    fn checked_outputs(&self) -> Result<Vec<OutputKind>, DnsConfigError> {
        if self.no_kube && self.outputs.contains(&OutputKind::Dnsendpoint) {
            return Err(DnsConfigError::DnsendpointNoKube);
        }
        if self.no_kube && !self.dry_run {
            return Err(DnsConfigError::NoKube);
        }
        // Without Kubernetes fleet DNS is a dry run, which needs no output.
        if self.outputs.is_empty() && !(self.no_kube && self.dry_run) {
            return Err(DnsConfigError::NoOutput);
        }
        let mut outputs = self.outputs.clone();
        outputs.sort();
        if let Some(w) = outputs.windows(2).find(|w| w[0] == w[1]) {
            return Err(DnsConfigError::TwiceOutput(w[0].label()));
        }
        Ok(outputs)
    }

    /// The RFC 2136 output's settings when it is given (`rfc`); its flags
    /// are refused without it.
    fn rfc2136_config(&self, rfc: bool) -> Result<Option<Rfc2136Config>, DnsConfigError> {
        let rfc2136 = if rfc {
            if self.cname_routing == CnameRoutingFlag::Weighted {
                return Err(DnsConfigError::WeightedRfc2136);
            }
            let server = self
                .server
                .as_deref()
                .ok_or(DnsConfigError::Rfc2136Needs("--dns-server HOST:PORT"))?;
            let name = self
                .tsig_key_name
                .as_deref()
                .ok_or(DnsConfigError::Rfc2136Needs("--dns-tsig-key-name"))?;
            let file = self
                .tsig_secret_file
                .as_ref()
                .ok_or(DnsConfigError::Rfc2136Needs("--dns-tsig-secret-file"))?;
            let algorithm: Algorithm = self
                .tsig_algorithm
                .as_deref()
                .unwrap_or("hmac-sha256")
                .parse()
                .map_err(DnsConfigError::Algorithm)?;
            let server = resolve(server)?;
            let key =
                KeySource::file(file, Some(name), Some(algorithm)).map_err(DnsConfigError::Key)?;
            Some(Rfc2136Config {
                server,
                key,
                timeout: RFC2136_TIMEOUT,
            })
        } else {
            let only = [
                (self.server.is_some(), "--dns-server"),
                (self.tsig_key_name.is_some(), "--dns-tsig-key-name"),
                (self.tsig_secret_file.is_some(), "--dns-tsig-secret-file"),
                (self.tsig_algorithm.is_some(), "--dns-tsig-algorithm"),
            ];
            if let Some((_, flag)) = only.into_iter().find(|(g, _)| *g) {
                return Err(DnsConfigError::OnlyRfc2136(flag));
            }
            None
        };
        Ok(rfc2136)
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `HOST:PORT` to the first address it resolves to, now (at start).
fn resolve(server: &str) -> Result<SocketAddr, DnsConfigError> {
    let err = |why: String| DnsConfigError::Server {
        server: server.to_owned(),
        why,
    };
    let mut addrs = server
        .to_socket_addrs()
        .map_err(|e| err(format!("not HOST:PORT or does not resolve: {e}")))?;
    addrs
        .next()
        .ok_or_else(|| err("resolves to no address".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> DnsFlags {
        DnsFlags {
            ttl: Duration::from_secs(30),
            max_targets: 32,
            rise: Duration::from_secs(10),
            resync: Duration::from_secs(300),
            ..DnsFlags::default()
        }
    }

    fn err(f: DnsFlags) -> String {
        f.check("gwhub-system", Duration::from_secs(60))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn off_without_a_zone_and_refused_combinations_say_why() {
        assert!(
            flags()
                .check("ns", Duration::from_secs(60))
                .unwrap()
                .is_none()
        );
        let mut f = flags();
        f.outputs = vec![OutputKind::Dnsendpoint];
        assert!(err(f).contains("no --dns-zone"));
        let mut f = flags();
        f.zones = vec!["fleet.test".into()];
        assert!(err(f.clone()).contains("no --dns-output"));
        f.outputs = vec![OutputKind::Rfc2136];
        assert!(err(f.clone()).contains("--dns-server"));
        f.outputs = vec![OutputKind::Dnsendpoint];
        f.server = Some("127.0.0.1:53".into());
        assert!(err(f.clone()).contains("is for --dns-output=rfc2136"));
        f.server = None;
        f.no_kube = true;
        assert!(err(f.clone()).contains("--no-kube"));
        // Without Kubernetes: a dry run only, which needs no output.
        f.outputs = Vec::new();
        assert!(err(f.clone()).contains("--dns-dry-run"));
        f.dry_run = true;
        let c = f.check("ns", Duration::from_secs(60)).unwrap().unwrap();
        assert!(c.dry_run && c.outputs().is_empty());
        f.dry_run = false;
        f.outputs = vec![OutputKind::Dnsendpoint];
        f.no_kube = false;
        f.zones = vec!["*.fleet.test".into()];
        assert!(err(f.clone()).contains("--dns-zone"));
        f.zones = vec!["Fleet.Test.".into()];
        f.owner_id = Some("a,b".into());
        assert!(err(f.clone()).contains("--dns-owner-id"));
        f.owner_id = None;
        f.ttl = Duration::from_millis(1500);
        assert!(err(f.clone()).contains("--dns-ttl"));
        f.ttl = Duration::from_secs(30);
        let c = f
            .check("gwhub-system", Duration::from_secs(60))
            .unwrap()
            .unwrap();
        assert_eq!(c.zones, ["fleet.test"]);
        assert_eq!(c.owner_id, "gwhub-system");
        assert!(c.dnsendpoint && c.rfc2136.is_none());
        assert_eq!(c.records.ttl_seconds, 30);
        assert_eq!(c.publish.stale_after_millis, 60_000);
        f.outputs = vec![OutputKind::Rfc2136];
        f.cname_routing = CnameRoutingFlag::Weighted;
        assert!(err(f).contains("weighted"));
    }
}
