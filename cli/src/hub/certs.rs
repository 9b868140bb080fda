//! `gwhub certs`: a development CA, the hub's server certificate and one
//! client certificate per cluster, so mTLS is as easy to try as
//! `--insecure`. Not a PKI: keys are written unencrypted and never rotate,
//! and every certificate is valid from now (back-dated a few minutes) for
//! `--validity` (one year by default;
//! run it again, with `--force`, to renew).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gwhub_common::identity::SPIFFE_CLUSTER_PREFIX;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// Hub SANs when `--hub-san` is not given: loopback and the in-cluster
/// Service name of the manifests.
pub(super) const DEFAULT_HUB_SANS: &str = "127.0.0.1,localhost,gwhub.gwhub-system.svc";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to write the PEM files to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Clusters to create client certificates for, e.g. east,west.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', required = true)]
    pub clusters: Vec<String>,
    /// DNS names and IP addresses the hub's certificate is valid for.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', default_value = DEFAULT_HUB_SANS)]
    pub hub_san: Vec<String>,
    /// Overwrite existing files.
    #[arg(long)]
    pub force: bool,
    /// How long the CA and every certificate are valid, from now
    /// (back-dated five minutes for clock skew); at most 10 years (3650d).
    #[arg(long, value_name = "DUR", default_value = "365d", value_parser = parse_validity)]
    pub validity: Duration,
}

/// Default of `--validity`: one year.
pub(super) const DEFAULT_VALIDITY: Duration = Duration::from_secs(365 * 86_400);
/// Longest `--validity`: ten years.
pub(super) const MAX_VALIDITY: Duration = Duration::from_secs(3650 * 86_400);

/// Why `gwhub certs` wrote nothing, or not everything: each names the flag
/// or file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("{given:?}: {source} (use e.g. 365d)")]
    ValidityFormat {
        given: String,
        #[source]
        source: humantime::DurationError,
    },
    #[error("{0:?}: must be between 1d and 3650d")]
    ValidityRange(String),
    #[error("--validity: at most {} days", MAX_VALIDITY.as_secs() / 86_400)]
    ValidityTooLong,
    #[error("--clusters: {name:?} is not a valid cluster name: {source}")]
    ClusterName {
        name: String,
        #[source]
        source: gwhub_model::ClusterNameError,
    },
    #[error("--clusters: {0:?} would clash with the CA or hub files")]
    ClashingCluster(String),
    #[error("--clusters: {0:?} given twice")]
    ClusterTwice(String),
    #[error("--hub-san: at least one DNS name or IP address is needed")]
    NoHubSan,
    #[error("refusing to overwrite {} (pass --force to replace them)", .0.join(", "))]
    Exists(Vec<String>),
    #[error("cannot create the {what}: {source}")]
    Create {
        what: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("{flag} {value:?}: {source}")]
    San {
        flag: &'static str,
        value: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("--out {}: {source}", path.display())]
    OutDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn parse_validity(s: &str) -> Result<Duration, CertsError> {
    let d = humantime::parse_duration(s).map_err(|source| CertsError::ValidityFormat {
        given: s.to_owned(),
        source,
    })?;
    if d < Duration::from_secs(86_400) || d > MAX_VALIDITY {
        return Err(CertsError::ValidityRange(s.to_owned()));
    }
    Ok(d)
}

/// The files one `gwhub certs` run writes, relative to `--out`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub ca: PathBuf,
    pub ca_key: PathBuf,
    pub hub_cert: PathBuf,
    pub hub_key: PathBuf,
    /// `(cluster, cert, key)`.
    pub clusters: Vec<(String, PathBuf, PathBuf)>,
}

impl Layout {
    pub fn new(out: &Path, clusters: &[String]) -> Self {
        Layout {
            ca: out.join("ca.pem"),
            ca_key: out.join("ca-key.pem"),
            hub_cert: out.join("hub.pem"),
            hub_key: out.join("hub-key.pem"),
            clusters: clusters
                .iter()
                .map(|c| {
                    (
                        c.clone(),
                        out.join(format!("{c}.pem")),
                        out.join(format!("{c}-key.pem")),
                    )
                })
                .collect(),
        }
    }

    fn all(&self) -> Vec<&Path> {
        let mut v = vec![
            self.ca.as_path(),
            self.ca_key.as_path(),
            self.hub_cert.as_path(),
            self.hub_key.as_path(),
        ];
        for (_, c, k) in &self.clusters {
            v.push(c);
            v.push(k);
        }
        v
    }
}

fn cluster_name_ok(name: &str) -> Result<(), gwhub_model::ClusterNameError> {
    gwhub_model::cluster::validate(name)
}

fn rc(what: &str) -> impl Fn(rcgen::Error) -> CertsError + '_ {
    move |source| CertsError::Create {
        what: what.to_owned(),
        source,
    }
}

/// Creates the CA, hub and cluster certificates, valid for
/// `DEFAULT_VALIDITY`; returns the files written.
pub fn generate(
    out: &Path,
    clusters: &[String],
    hub_sans: &[String],
    force: bool,
) -> Result<Layout, CertsError> {
    generate_valid_for(out, clusters, hub_sans, force, DEFAULT_VALIDITY)
}

/// How far before "now" certificates start, so a peer whose clock is a
/// little behind accepts them.
pub(super) const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// Sets `p`'s validity to `[from, to]` (Unix seconds; clamped to 1970).
pub fn set_window(p: &mut CertificateParams, from: i64, to: i64) {
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let at = |t: i64| epoch + Duration::from_secs(u64::try_from(t).unwrap_or(0));
    p.not_before = at(from);
    p.not_after = at(to);
}

/// [`generate`] with certificates valid for `validity` from now (back-dated
/// by [`BACKDATE`]).
pub(super) fn generate_valid_for(
    out: &Path,
    clusters: &[String],
    hub_sans: &[String],
    force: bool,
    validity: Duration,
) -> Result<Layout, CertsError> {
    if validity > MAX_VALIDITY {
        return Err(CertsError::ValidityTooLong);
    }
    let now = jiff::Timestamp::now().as_second();
    let (from, to) = (
        now - BACKDATE.as_secs() as i64,
        now + validity.as_secs() as i64,
    );
    let valid = |p: &mut CertificateParams| set_window(p, from, to);
    check_clusters(clusters)?;
    let hub_sans: Vec<String> = hub_sans
        .iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    if hub_sans.is_empty() {
        return Err(CertsError::NoHubSan);
    }
    let layout = Layout::new(out, clusters);
    if !force {
        refuse_existing(&layout)?;
    }

    let ca_key = KeyPair::generate().map_err(rc("CA key"))?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "gwhub development CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    valid(&mut ca);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(rc("CA"))?;
    let issuer = Issuer::new(ca, &ca_key);

    let leaf = |cn: &str,
                sans: Vec<SanType>,
                usage: ExtendedKeyUsagePurpose|
     -> Result<(String, String), CertsError> {
        let key = KeyPair::generate().map_err(rc("key"))?;
        let mut p = CertificateParams::default();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.subject_alt_names = sans;
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![usage];
        p.use_authority_key_identifier_extension = true;
        valid(&mut p);
        let cert = p
            .signed_by(&key, &issuer)
            .map_err(rc(&format!("certificate for {cn}")))?;
        Ok((cert.pem(), key.serialize_pem()))
    };

    let sans = san_types(&hub_sans)?;
    let hub = leaf("gwhub", sans, ExtendedKeyUsagePurpose::ServerAuth)?;
    let mut files = vec![
        (layout.ca.clone(), ca_cert.pem(), false),
        (layout.ca_key.clone(), ca_key.serialize_pem(), true),
        (layout.hub_cert.clone(), hub.0, false),
        (layout.hub_key.clone(), hub.1, true),
    ];
    for (name, cert, key) in &layout.clusters {
        let uri = format!("{SPIFFE_CLUSTER_PREFIX}{name}");
        let san = SanType::URI(uri.as_str().try_into().map_err(|source| CertsError::San {
            flag: "--clusters",
            value: name.clone(),
            source,
        })?);
        let (c, k) = leaf(name, vec![san], ExtendedKeyUsagePurpose::ClientAuth)?;
        files.push((cert.clone(), c, false));
        files.push((key.clone(), k, true));
    }

    std::fs::create_dir_all(out).map_err(|source| CertsError::OutDir {
        path: out.to_owned(),
        source,
    })?;
    for (path, contents, secret) in files {
        write(&path, &contents, secret).map_err(|source| CertsError::Write {
            path: path.clone(),
            source,
        })?;
    }
    Ok(layout)
}

/// Refuses cluster names that are not DNS labels, that would clash with
/// the CA's or the hub's files, or that are given twice.
fn check_clusters(clusters: &[String]) -> Result<(), CertsError> {
    let mut seen = std::collections::BTreeSet::new();
    for c in clusters {
        if let Err(source) = cluster_name_ok(c) {
            return Err(CertsError::ClusterName {
                name: c.clone(),
                source,
            });
        }
        if matches!(c.as_str(), "ca" | "ca-key" | "hub" | "hub-key") {
            return Err(CertsError::ClashingCluster(c.clone()));
        }
        if !seen.insert(c) {
            return Err(CertsError::ClusterTwice(c.clone()));
        }
    }
    Ok(())
}

/// Refuses to overwrite: the files of `layout` that already exist.
fn refuse_existing(layout: &Layout) -> Result<(), CertsError> {
    let existing: Vec<String> = layout
        .all()
        .into_iter()
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if !existing.is_empty() {
        return Err(CertsError::Exists(existing));
    }
    Ok(())
}

/// The hub certificate's SANs: an IP address where `--hub-san` parses as
/// one, else a DNS name.
fn san_types(hub_sans: &[String]) -> Result<Vec<SanType>, CertsError> {
    let mut sans = Vec::new();
    for s in hub_sans {
        sans.push(match s.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => {
                SanType::DnsName(s.as_str().try_into().map_err(|source| CertsError::San {
                    flag: "--hub-san",
                    value: s.clone(),
                    source,
                })?)
            }
        });
    }
    Ok(sans)
}

/// Keys are readable by the owner only.
fn write(path: &Path, contents: &str, secret: bool) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    std::io::Write::write_all(&mut options.open(path)?, contents.as_bytes())
}

pub(super) fn run(args: &Args) -> Result<String, CertsError> {
    let l = generate_valid_for(
        &args.out,
        &args.clusters,
        &args.hub_san,
        args.force,
        args.validity,
    )?;
    let d = |p: &Path| p.display().to_string();
    let mut out = String::from("wrote:\n");
    out.push_str(&format!("  {}  (CA certificate)\n", d(&l.ca)));
    out.push_str(&format!("  {}  (CA key: keep it private)\n", d(&l.ca_key)));
    out.push_str(&format!(
        "  {}, {}  (hub, valid for {})\n",
        d(&l.hub_cert),
        d(&l.hub_key),
        args.hub_san.join(", ")
    ));
    for (name, cert, key) in &l.clusters {
        out.push_str(&format!(
            "  {}, {}  (cluster {name}: {SPIFFE_CLUSTER_PREFIX}{name})\n",
            d(cert),
            d(key)
        ));
    }
    out.push_str(&format!(
        "\nhub:\n  gwhub serve --no-kube --listen 127.0.0.1:7443 --dashboard-listen 127.0.0.1:7444 \\\n    \
         --tls-cert {} --tls-key {} --client-ca {}\n",
        d(&l.hub_cert),
        d(&l.hub_key),
        d(&l.ca)
    ));
    for (name, cert, key) in &l.clusters {
        out.push_str(&format!(
            "agent ({name}):\n  gwhub-agent run --hub https://127.0.0.1:7443 \\\n    \
             --tls-cert {} --tls-key {} --ca {} --from-dir DIR\n",
            d(cert),
            d(key),
            d(&l.ca)
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--validity 1d` is a day from now, not from the previous midnight
    /// (which wrote certificates already expired by the evening).
    #[test]
    fn validity_counts_from_now_back_dated_a_little() {
        let out = std::env::temp_dir().join(format!(
            "gwhub-certs-validity-{}-{}",
            std::process::id(),
            jiff::Timestamp::now().as_nanosecond()
        ));
        let l = generate_valid_for(
            &out,
            &["east".to_owned()],
            &["127.0.0.1".to_owned()],
            false,
            Duration::from_secs(86_400),
        )
        .unwrap();
        let now = jiff::Timestamp::now().as_second();
        for file in [&l.ca, &l.hub_cert, &l.clusters[0].1] {
            let pem = std::fs::read(file).unwrap();
            let v = gwhub_common::identity::validities_from_pem(&pem).unwrap()[0];
            assert!(v.not_before <= now, "{file:?}: {v:?}");
            assert!(v.not_before >= now - 600, "{file:?}: {v:?}");
            assert!(v.not_after >= now + 86_400 - 60, "{file:?}: {v:?}");
            assert!(v.not_after <= now + 86_400 + 60, "{file:?}: {v:?}");
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}
