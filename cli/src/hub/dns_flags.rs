//! `gwhub serve`'s fleet DNS flags (spec section 8); the hub checks their
//! combination ([`gwhub_dns::DnsFlags::check`]). The hub's enums know
//! no command line: their flag values are mirrored here, with `From`.

use std::path::PathBuf;
use std::time::Duration;

use gwhub_dns::{CnameRoutingFlag, DnsFlags, OutputKind, WhenNoneFlag};

/// `--dns-output` (the hub's [`OutputKind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputArg {
    /// One external-dns `DNSEndpoint` per (hub Gateway, hostname).
    Dnsendpoint,
    /// RFC 2136 dynamic updates to `--dns-server`.
    Rfc2136,
}

impl From<OutputArg> for OutputKind {
    fn from(o: OutputArg) -> Self {
        match o {
            OutputArg::Dnsendpoint => OutputKind::Dnsendpoint,
            OutputArg::Rfc2136 => OutputKind::Rfc2136,
        }
    }
}

/// `--dns-when-none` (the hub's [`WhenNoneFlag`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WhenNoneArg {
    Keep,
    Remove,
}

impl From<WhenNoneArg> for WhenNoneFlag {
    fn from(w: WhenNoneArg) -> Self {
        match w {
            WhenNoneArg::Keep => WhenNoneFlag::Keep,
            WhenNoneArg::Remove => WhenNoneFlag::Remove,
        }
    }
}

/// `--dns-cname-routing` (the hub's [`CnameRoutingFlag`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CnameRoutingArg {
    Simple,
    Weighted,
}

impl From<CnameRoutingArg> for CnameRoutingFlag {
    fn from(c: CnameRoutingArg) -> Self {
        match c {
            CnameRoutingArg::Simple => CnameRoutingFlag::Simple,
            CnameRoutingArg::Weighted => CnameRoutingFlag::Weighted,
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct DnsArgs {
    /// Publish the hostnames of hub Gateway listeners under this zone
    /// (repeatable; suffix match on whole labels). Without one, fleet DNS
    /// is off.
    #[arg(long = "dns-zone", value_name = "ZONE")]
    pub zones: Vec<String>,
    /// Where the records go (repeatable, required with --dns-zone):
    /// dnsendpoint (external-dns DNSEndpoint objects) or rfc2136 (dynamic
    /// updates to --dns-server).
    #[arg(long = "dns-output", value_enum, value_name = "OUTPUT")]
    pub outputs: Vec<OutputArg>,
    /// The authoritative server of --dns-output=rfc2136.
    #[arg(long = "dns-server", value_name = "HOST:PORT")]
    pub server: Option<String>,
    /// The TSIG key's name (rfc2136).
    #[arg(long = "dns-tsig-key-name", value_name = "NAME")]
    pub tsig_key_name: Option<String>,
    /// The TSIG secret: bare base64, or a `key { ... };` clause as
    /// tsig-keygen prints it (rfc2136; re-read when it changes).
    #[arg(long = "dns-tsig-secret-file", value_name = "PATH")]
    pub tsig_secret_file: Option<PathBuf>,
    /// The TSIG algorithm (rfc2136): hmac-sha256 (default), hmac-sha384,
    /// hmac-sha512.
    #[arg(long = "dns-tsig-algorithm", value_name = "ALG")]
    pub tsig_algorithm: Option<String>,
    /// The owner id in the ownership TXT records (default: --namespace).
    #[arg(long = "dns-owner-id", value_name = "ID")]
    pub owner_id: Option<String>,
    /// The records' TTL (whole seconds).
    #[arg(long = "dns-ttl", value_name = "DUR", default_value = "30s", value_parser = gwhub_model::time::parse_duration)]
    pub ttl: Duration,
    /// At most this many targets per record set (chosen by rendezvous hash).
    #[arg(long = "dns-max-targets", value_name = "N", default_value_t = gwhub_dns_rules::DEFAULT_MAX_TARGETS)]
    pub max_targets: usize,
    /// A cluster eligible again joins a published set after this long.
    #[arg(long = "dns-rise", value_name = "DUR", default_value = "10s", value_parser = gwhub_model::time::parse_duration)]
    pub rise: Duration,
    /// No eligible cluster: keep the last published set, or remove it.
    #[arg(
        long = "dns-when-none",
        value_enum,
        value_name = "WHAT",
        default_value = "keep"
    )]
    pub when_none: WhenNoneArg,
    /// Read the published names back and repair drift this often (rfc2136).
    #[arg(long = "dns-resync", value_name = "DUR", default_value = "5m", value_parser = gwhub_model::time::parse_duration)]
    pub resync: Duration,
    /// Hostname-only load balancers: simple (one CNAME for exactly one
    /// cluster) or weighted (dnsendpoint: one weighted CNAME per cluster).
    #[arg(
        long = "dns-cname-routing",
        value_enum,
        value_name = "MODE",
        default_value = "simple"
    )]
    pub cname_routing: CnameRoutingArg,
    /// Compute and show everything, send nothing.
    #[arg(long = "dns-dry-run")]
    pub dry_run: bool,
}

impl DnsArgs {
    /// The flags for the hub's check.
    pub fn flags(&self, no_kube: bool) -> DnsFlags {
        DnsFlags {
            zones: self.zones.clone(),
            outputs: self.outputs.iter().map(|&o| o.into()).collect(),
            server: self.server.clone(),
            tsig_key_name: self.tsig_key_name.clone(),
            tsig_secret_file: self.tsig_secret_file.clone(),
            tsig_algorithm: self.tsig_algorithm.clone(),
            owner_id: self.owner_id.clone(),
            ttl: self.ttl,
            max_targets: self.max_targets,
            rise: self.rise,
            when_none: self.when_none.into(),
            resync: self.resync,
            cname_routing: self.cname_routing.into(),
            dry_run: self.dry_run,
            no_kube,
        }
    }
}
