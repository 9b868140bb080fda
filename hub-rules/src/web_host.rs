//! Which `Host` the web page answers to: a defence against DNS rebinding.
//!
//! A page on `evil.example` whose name the attacker re-points at the hub's
//! address (a loopback or private one the browser can reach) would read a
//! token-less hub's `/api/` as its own origin. The browser still sends
//! `Host: evil.example`, so the hub answers only to names it knows: loopback
//! names (`localhost`, `*.localhost`), IP literals (an origin that is an
//! address cannot be re-pointed) and the names given with `--web-host`.
//! Pure, so the rule is tested apart from the listener.

use std::net::IpAddr;

use gwhub_model::names::NameRule;

/// The names the page answers to besides loopback names and IP literals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebHosts(Vec<String>);

/// A `--web-host` value that is not a host name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is not a host name: give a DNS name such as hub.example.com (lowercase letters, digits, '-' and '.'), without a port",
    gwhub_model::text::quote_client_input(.0)
)]
pub struct BadWebHost(pub String);

impl WebHosts {
    /// The names of `--web-host`, checked and in their canonical form
    /// (lowercase, no trailing `.`).
    pub fn new<I, S>(names: I) -> Result<Self, BadWebHost>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        names
            .into_iter()
            .map(|n| parse_name(n.as_ref()))
            .collect::<Result<Vec<_>, _>>()
            .map(WebHosts)
    }

    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// Whether the page answers a request whose `Host` (or HTTP/2
    /// `:authority`) is `host`, with or without a port. A request without
    /// one (`None`) comes from no browser, so it cannot be a rebinding.
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Some(host) = host else { return true };
        let Some(name) = strip_port(host) else {
            return false;
        };
        if name.parse::<IpAddr>().is_ok() {
            return true;
        }
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        name == "localhost" || name.ends_with(".localhost") || self.0.contains(&name)
    }
}

/// One `--web-host` value in its canonical form.
pub fn parse_name(name: &str) -> Result<String, BadWebHost> {
    let canonical = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if canonical.parse::<IpAddr>().is_ok() || NameRule::Dns1123Subdomain.allows(&canonical) {
        Ok(canonical)
    } else {
        Err(BadWebHost(name.to_owned()))
    }
}

/// The host part of a `Host` value: `name`, `name:port`, `1.2.3.4:port`,
/// `[::1]:port`; `None` when it is none of these.
fn strip_port(host: &str) -> Option<&str> {
    let port_ok = |p: &str| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = host.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        let ok = after.is_empty() || after.strip_prefix(':').is_some_and(port_ok);
        return ok.then_some(ip);
    }
    match host.split_once(':') {
        None => Some(host),
        Some((name, port)) if port_ok(port) => Some(name),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_ip_literals_and_configured_names_only() {
        let hosts = WebHosts::new(["hub.example.com", "Status.Corp."]).unwrap();
        assert_eq!(hosts.names(), ["hub.example.com", "status.corp"]);
        let cases: &[(Option<&str>, bool)] = &[
            (None, true),
            (Some("localhost"), true),
            (Some("localhost:7445"), true),
            (Some("LOCALHOST."), true),
            (Some("app.localhost:80"), true),
            (Some("127.0.0.1:7445"), true),
            (Some("10.1.2.3"), true),
            (Some("[::1]:7445"), true),
            (Some("[fe80::1]"), true),
            (Some("hub.example.com"), true),
            (Some("HUB.example.com:443"), true),
            (Some("hub.example.com."), true),
            (Some("status.corp:7445"), true),
            // DNS rebinding: a name the hub was not given.
            (Some("evil.example"), false),
            (Some("evil.example:7445"), false),
            (Some("localhost.evil.example"), false),
            (Some("hub.example.com.evil.example"), false),
            (Some("hub"), false),
            (Some(""), false),
            (Some("hub.example.com:x"), false),
            (Some("[::1"), false),
            (Some("[::1]x"), false),
            (Some("127.0.0.1:7445:1"), false),
        ];
        for (host, want) in cases {
            assert_eq!(hosts.allows(*host), *want, "{host:?}");
        }
        assert!(!WebHosts::default().allows(Some("hub.example.com")));
    }

    #[test]
    fn bad_names_are_refused_with_a_short_echo() {
        for ok in ["hub", "a.b-c.example", "10.0.0.1", "::1"] {
            assert!(parse_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "hub:7445",
            "a b",
            "*.example.com",
            "http://hub",
            "é.example",
        ] {
            let e = parse_name(bad).unwrap_err().to_string();
            assert!(e.contains("is not a host name"), "{bad}: {e}");
        }
        let long = parse_name(&"x".repeat(10_000)).unwrap_err().to_string();
        assert!(long.len() < 300, "{long}");
    }
}
