//! The TLS material's metrics (`/metrics`): expiry, reloads, streams
//! ended for their certificate and refused handshakes, with their labels.
//! Apart from the reloading so that what is counted, and under which
//! label, reads in one place.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio_rustls::rustls;

use super::{CLIENT_CA, DASHBOARD_CLIENT_CA, SERVING};

/// The `certificate` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CertLabel {
    certificate: &'static str,
}

/// The labels of a reload.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReloadLabels {
    certificate: &'static str,
    result: &'static str,
}

/// The `reason` label of a stream ended for its certificate.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabel {
    reason: &'static str,
}

gwhub_common::metrics! {
    /// The TLS material's metrics (`/metrics`).
    #[derive(Clone, Debug)]
    pub struct TlsMetrics {
        expiry: Family<CertLabel, Gauge> =>
            "gwhub_tls_certificate_expiry_timestamp_seconds",
            "notAfter (Unix seconds) of the soonest-expiring certificate in each TLS file in use.",
        reloads: Family<ReloadLabels, Counter> => "gwhub_tls_reloads",
            "TLS files re-read after a change, by result (an error keeps the old material).",
        streams_ended: Family<ReasonLabel, Counter> => "gwhub_tls_streams_ended",
            "Agent streams ended because the client certificate expired or is no longer trusted.",
        handshakes_refused: Family<RefusalLabels, Counter> => "gwhub_tls_handshakes_refused",
            "TLS handshakes that failed, per listener and reason (expired, untrusted, no_certificate, timeout, other).",
    }
}

/// The labels of a failed handshake.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RefusalLabels {
    listener: &'static str,
    reason: &'static str,
}

/// Why a handshake failed, from tokio-rustls' error: the client
/// certificate expired (or is not valid yet), does not chain to the CA in
/// use, was not sent; anything else (the client refused ours, garbage).
pub fn refusal_reason(e: &std::io::Error) -> &'static str {
    use rustls::CertificateError as C;
    let Some(e) = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) else {
        return "other";
    };
    match e {
        rustls::Error::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => "expired",
        rustls::Error::InvalidCertificate(_) => "untrusted",
        rustls::Error::NoCertificatesPresented => "no_certificate",
        _ => "other",
    }
}

impl Default for TlsMetrics {
    fn default() -> Self {
        let m = TlsMetrics {
            expiry: Family::default(),
            reloads: Family::default(),
            streams_ended: Family::default(),
            handshakes_refused: Family::default(),
        };
        for certificate in [SERVING, CLIENT_CA, DASHBOARD_CLIENT_CA] {
            for result in ["ok", "error"] {
                let _ = m.reloads.get_or_create(&ReloadLabels {
                    certificate,
                    result,
                });
            }
        }
        for reason in ["expired", "untrusted"] {
            let _ = m.streams_ended.get_or_create(&ReasonLabel { reason });
        }
        m
    }
}

impl TlsMetrics {
    pub(super) fn expiry(&self, certificate: &'static str, not_after: i64) {
        self.expiry
            .get_or_create(&CertLabel { certificate })
            .set(not_after);
    }

    pub(super) fn reloaded(&self, certificate: &'static str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.reloads
            .get_or_create(&ReloadLabels {
                certificate,
                result,
            })
            .inc();
    }

    pub(super) fn ended(&self, reason: &'static str) {
        self.streams_ended
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    /// Reloads of `certificate` (`serving`, `client_ca`,
    /// `dashboard_client_ca`) with `result` (`ok`, `error`) so far.
    pub fn reloads(&self, certificate: &'static str, result: &'static str) -> u64 {
        self.reloads
            .get_or_create(&ReloadLabels {
                certificate,
                result,
            })
            .get()
    }

    /// Counts a failed handshake on `listener`.
    pub fn refused(&self, listener: &'static str, reason: &'static str) {
        self.handshakes_refused
            .get_or_create(&RefusalLabels { listener, reason })
            .inc();
    }

    /// Handshakes on `listener` refused for `reason` so far.
    pub fn handshakes_refused(&self, listener: &'static str, reason: &'static str) -> u64 {
        self.handshakes_refused
            .get_or_create(&RefusalLabels { listener, reason })
            .get()
    }

    /// Streams ended for `reason` (`expired`, `untrusted`) so far.
    pub fn streams_ended(&self, reason: &'static str) -> u64 {
        self.streams_ended
            .get_or_create(&ReasonLabel { reason })
            .get()
    }
}
