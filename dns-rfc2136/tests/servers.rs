//! The rfc2136 client against real authoritative servers: the same
//! scenarios against BIND 9 and Knot DNS on loopback, each with a zone and
//! keys of its own, every outcome checked with `dig` as an operator would.

use std::time::{Duration, Instant};

use crate::common::{Key, Keys, Kind, Server, ZONE};
use gwhub_dns_rfc2136::{
    Algorithm, Client, Error, Expect, KeySource, Owner, RType, ReadBack, RecordSet, TsigKey,
};
use gwhub_test_kit::mounted_secret::MountedSecret;
use gwhub_test_kit::procs::temp_dir;

/// Generous: CI runs everything at once on two cores.
const TIMEOUT: Duration = Duration::from_secs(10);

const OURS: &str = "heritage=gwhub,owner=gwhub-system,gateway=apps/web";
const THEIRS: &str = "heritage=gwhub,owner=other-hub,gateway=apps/web";

fn fixed(key: &Key) -> KeySource {
    let secret = base64_decode(&key.secret);
    let alg: Algorithm = key.algorithm.parse().unwrap();
    KeySource::fixed(TsigKey::new(&key.name, alg, secret).unwrap())
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn a(name: &str, values: &[&str]) -> RecordSet {
    set(name, RType::A, values)
}

fn set(name: &str, rtype: RType, values: &[&str]) -> RecordSet {
    RecordSet {
        name: name.into(),
        rtype,
        ttl: 30,
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

fn owner(txt_name: &str, value: &str) -> Owner {
    Owner {
        txt_name: txt_name.into(),
        txt_value: value.into(),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// One server with one update key, and a client signing with it.
fn setup(kind: Kind) -> (Server, Key, Client) {
    let key = Key::generate("gwhub-hub", "hmac-sha256");
    let server = Server::start(kind, &Keys::updating(&[&key]));
    let client = Client::new(server.addr(), fixed(&key), TIMEOUT);
    (server, key, client)
}

#[track_caller]
fn assert_label(r: Result<(), Error>, label: &str) -> Error {
    match r {
        Err(e) if e.label() == label => e,
        other => panic!("expected {label}, got {other:?}"),
    }
}

async fn create_update_delete(kind: Kind) {
    let (s, _key, c) = setup(kind);
    let own = owner("_gwhub-a.app.fleet.test", OURS);
    c.publish(
        ZONE,
        &a("app.fleet.test", &["192.0.2.2", "192.0.2.1"]),
        &own,
        Expect::Create,
    )
    .await
    .unwrap();
    assert_eq!(s.dig("app.fleet.test", "A"), ["192.0.2.1", "192.0.2.2"]);
    assert_eq!(s.dig("_gwhub-a.app.fleet.test", "TXT"), [OURS]);
    assert_eq!(
        c.read("app.fleet.test", RType::A, "_gwhub-a.app.fleet.test")
            .await
            .unwrap(),
        ReadBack {
            records: strings(&["192.0.2.1", "192.0.2.2"]),
            ttl: Some(30),
            txt: strings(&[OURS]),
        }
    );
    // A second create finds our own records: a conflict, nothing changed.
    let e = assert_label(
        c.publish(
            ZONE,
            &a("app.fleet.test", &["192.0.2.9"]),
            &own,
            Expect::Create,
        )
        .await,
        "conflict",
    );
    assert!(e.to_string().contains("app.fleet.test"), "{e}");

    let mut update = a("app.fleet.test", &["192.0.2.3", "192.0.2.2"]);
    update.ttl = 60;
    c.publish(ZONE, &update, &own, Expect::Update)
        .await
        .unwrap();
    assert_eq!(s.dig("app.fleet.test", "A"), ["192.0.2.2", "192.0.2.3"]);
    assert_eq!(s.dig("_gwhub-a.app.fleet.test", "TXT"), [OURS]);
    let back = c
        .read("app.fleet.test", RType::A, "_gwhub-a.app.fleet.test")
        .await
        .unwrap();
    assert_eq!(back.ttl, Some(60));

    c.delete(ZONE, "app.fleet.test", RType::A, &own)
        .await
        .unwrap();
    assert!(s.dig("app.fleet.test", "A").is_empty());
    assert!(s.dig("_gwhub-a.app.fleet.test", "TXT").is_empty());
    assert_eq!(s.status("app.fleet.test", "A"), "NXDOMAIN");
    assert_eq!(s.status("_gwhub-a.app.fleet.test", "TXT"), "NXDOMAIN");
    assert_eq!(
        c.read("app.fleet.test", RType::A, "_gwhub-a.app.fleet.test")
            .await
            .unwrap(),
        ReadBack::default()
    );
    // Gone: neither update nor delete finds our ownership record.
    assert_label(
        c.publish(
            ZONE,
            &a("app.fleet.test", &["192.0.2.1"]),
            &own,
            Expect::Update,
        )
        .await,
        "conflict",
    );
    assert_label(
        c.delete(ZONE, "app.fleet.test", RType::A, &own).await,
        "conflict",
    );
    assert!(s.dig("app.fleet.test", "A").is_empty());
}

async fn aaaa_beside_a(kind: Kind) {
    let (s, _key, c) = setup(kind);
    let own_a = owner("_gwhub-a.dual.fleet.test", OURS);
    let own_aaaa = owner("_gwhub-aaaa.dual.fleet.test", OURS);
    c.publish(
        ZONE,
        &a("dual.fleet.test", &["192.0.2.1"]),
        &own_a,
        Expect::Create,
    )
    .await
    .unwrap();
    c.publish(
        ZONE,
        &set(
            "dual.fleet.test",
            RType::Aaaa,
            &["2001:db8::1", "2001:DB8::2"],
        ),
        &own_aaaa,
        Expect::Create,
    )
    .await
    .unwrap();
    assert_eq!(s.dig("dual.fleet.test", "A"), ["192.0.2.1"]);
    assert_eq!(
        s.dig("dual.fleet.test", "AAAA"),
        ["2001:db8::1", "2001:db8::2"]
    );
    // Deleting the AAAA set leaves the A set and its owner alone.
    c.delete(ZONE, "dual.fleet.test", RType::Aaaa, &own_aaaa)
        .await
        .unwrap();
    assert!(s.dig("dual.fleet.test", "AAAA").is_empty());
    assert_eq!(s.dig("dual.fleet.test", "A"), ["192.0.2.1"]);
    assert_eq!(s.dig("_gwhub-a.dual.fleet.test", "TXT"), [OURS]);
}

async fn a_foreign_owner_is_a_conflict(kind: Kind) {
    let (s, key, c) = setup(kind);
    s.nsupdate(
        &key,
        &[
            "add app.fleet.test 300 A 203.0.113.9",
            &format!("add _gwhub-a.app.fleet.test 300 TXT \"{THEIRS}\""),
        ],
    );
    let own = owner("_gwhub-a.app.fleet.test", OURS);
    let e = assert_label(
        c.publish(
            ZONE,
            &a("app.fleet.test", &["192.0.2.1"]),
            &own,
            Expect::Create,
        )
        .await,
        "conflict",
    );
    assert!(
        matches!(
            e,
            Error::Conflict {
                rcode: "YXRRSET",
                ..
            }
        ),
        "{e}"
    );
    let e = assert_label(
        c.publish(
            ZONE,
            &a("app.fleet.test", &["192.0.2.1"]),
            &own,
            Expect::Update,
        )
        .await,
        "conflict",
    );
    assert!(
        matches!(
            e,
            Error::Conflict {
                rcode: "NXRRSET",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("_gwhub-a.app.fleet.test"), "{e}");
    assert_label(
        c.delete(ZONE, "app.fleet.test", RType::A, &own).await,
        "conflict",
    );
    // The other owner's records are untouched.
    assert_eq!(s.dig("app.fleet.test", "A"), ["203.0.113.9"]);
    assert_eq!(s.dig("_gwhub-a.app.fleet.test", "TXT"), [THEIRS]);
    let back = c
        .read("app.fleet.test", RType::A, "_gwhub-a.app.fleet.test")
        .await
        .unwrap();
    assert_eq!(back.txt, [THEIRS]);
}

async fn records_made_by_hand_are_a_conflict(kind: Kind) {
    let (s, key, c) = setup(kind);
    s.nsupdate(&key, &["add legacy.fleet.test 300 A 198.51.100.7"]);
    let own = owner("_gwhub-a.legacy.fleet.test", OURS);
    assert_label(
        c.publish(
            ZONE,
            &a("legacy.fleet.test", &["192.0.2.1"]),
            &own,
            Expect::Create,
        )
        .await,
        "conflict",
    );
    assert_eq!(s.dig("legacy.fleet.test", "A"), ["198.51.100.7"]);
    assert!(s.dig("_gwhub-a.legacy.fleet.test", "TXT").is_empty());
    // A CNAME made by hand blocks an A set too (a server would silently
    // ignore the A beside it).
    s.nsupdate(&key, &["add alias.fleet.test 300 CNAME elsewhere.example."]);
    let own = owner("_gwhub-a.alias.fleet.test", OURS);
    assert_label(
        c.publish(
            ZONE,
            &a("alias.fleet.test", &["192.0.2.1"]),
            &own,
            Expect::Create,
        )
        .await,
        "conflict",
    );
    assert_eq!(s.dig("alias.fleet.test", "CNAME"), ["elsewhere.example."]);
    assert!(s.dig("_gwhub-a.alias.fleet.test", "TXT").is_empty());
}

async fn cname(kind: Kind) {
    let (s, _key, c) = setup(kind);
    let own = owner("_gwhub-cname.lb.fleet.test", OURS);
    c.publish(
        ZONE,
        &set("lb.fleet.test", RType::Cname, &["abc.elb.example.com"]),
        &own,
        Expect::Create,
    )
    .await
    .unwrap();
    assert_eq!(s.dig("lb.fleet.test", "CNAME"), ["abc.elb.example.com."]);
    assert_eq!(
        c.read("lb.fleet.test", RType::Cname, "_gwhub-cname.lb.fleet.test")
            .await
            .unwrap()
            .records,
        ["abc.elb.example.com"]
    );
    // An A set cannot be created beside our CNAME.
    assert_label(
        c.publish(
            ZONE,
            &a("lb.fleet.test", &["192.0.2.1"]),
            &owner("_gwhub-a.lb.fleet.test", OURS),
            Expect::Create,
        )
        .await,
        "conflict",
    );
    c.publish(
        ZONE,
        &set("lb.fleet.test", RType::Cname, &["def.elb.example.com."]),
        &own,
        Expect::Update,
    )
    .await
    .unwrap();
    assert_eq!(s.dig("lb.fleet.test", "CNAME"), ["def.elb.example.com."]);
    assert!(s.dig("_gwhub-a.lb.fleet.test", "TXT").is_empty());
    // A CNAME is not created where anything else is.
    c.publish(
        ZONE,
        &a("busy.fleet.test", &["192.0.2.1"]),
        &owner("_gwhub-a.busy.fleet.test", OURS),
        Expect::Create,
    )
    .await
    .unwrap();
    assert_label(
        c.publish(
            ZONE,
            &set("busy.fleet.test", RType::Cname, &["x.example.com"]),
            &owner("_gwhub-cname.busy.fleet.test", OURS),
            Expect::Create,
        )
        .await,
        "conflict",
    );
    assert!(s.dig("busy.fleet.test", "CNAME").is_empty());
    c.delete(ZONE, "lb.fleet.test", RType::Cname, &own)
        .await
        .unwrap();
    assert_eq!(s.status("lb.fleet.test", "CNAME"), "NXDOMAIN");
}

async fn wildcard(kind: Kind) {
    let (s, _key, c) = setup(kind);
    let own = owner("_gwhub-a._wildcard.apps.fleet.test", OURS);
    c.publish(
        ZONE,
        &a("*.apps.fleet.test", &["192.0.2.10", "192.0.2.11"]),
        &own,
        Expect::Create,
    )
    .await
    .unwrap();
    assert_eq!(
        s.dig("foo.apps.fleet.test", "A"),
        ["192.0.2.10", "192.0.2.11"]
    );
    assert_eq!(
        s.dig("bar.apps.fleet.test", "A"),
        ["192.0.2.10", "192.0.2.11"]
    );
    assert_eq!(s.dig("_gwhub-a._wildcard.apps.fleet.test", "TXT"), [OURS]);
    let back = c
        .read(
            "*.apps.fleet.test",
            RType::A,
            "_gwhub-a._wildcard.apps.fleet.test",
        )
        .await
        .unwrap();
    assert_eq!(back.records, ["192.0.2.10", "192.0.2.11"]);
    assert_eq!(back.txt, [OURS]);
    c.publish(
        ZONE,
        &a("*.apps.fleet.test", &["192.0.2.12"]),
        &own,
        Expect::Update,
    )
    .await
    .unwrap();
    assert_eq!(s.dig("foo.apps.fleet.test", "A"), ["192.0.2.12"]);
    c.delete(ZONE, "*.apps.fleet.test", RType::A, &own)
        .await
        .unwrap();
    assert!(s.dig("foo.apps.fleet.test", "A").is_empty());
    assert!(
        s.dig("_gwhub-a._wildcard.apps.fleet.test", "TXT")
            .is_empty()
    );
}

async fn a_wrong_key_is_a_bad_key(kind: Kind) {
    let (s, key, _c) = setup(kind);
    let own = owner("_gwhub-a.app.fleet.test", OURS);
    let rs = a("app.fleet.test", &["192.0.2.1"]);
    // The right name with another secret: BADSIG.
    let mut wrong = Key::generate(&key.name, "hmac-sha256");
    wrong.name = key.name.clone();
    let c = Client::new(s.addr(), fixed(&wrong), TIMEOUT);
    let e = assert_label(c.publish(ZONE, &rs, &own, Expect::Create).await, "bad_key");
    let text = e.to_string();
    assert!(
        text.contains("gwhub-hub") && text.contains("hmac-sha256") && text.contains("BADSIG"),
        "{text}"
    );
    // A name the server does not know: BADKEY.
    let unknown = Key::generate("nobody", "hmac-sha256");
    let c = Client::new(s.addr(), fixed(&unknown), TIMEOUT);
    let e = assert_label(c.publish(ZONE, &rs, &own, Expect::Create).await, "bad_key");
    assert!(
        e.to_string().contains("nobody") && e.to_string().contains("BADKEY"),
        "{e}"
    );
    // The right name and secret with another algorithm: BADKEY too.
    let c = Client::new(
        s.addr(),
        KeySource::fixed(
            TsigKey::new(&key.name, Algorithm::HmacSha512, base64_decode(&key.secret)).unwrap(),
        ),
        TIMEOUT,
    );
    let e = assert_label(c.publish(ZONE, &rs, &own, Expect::Create).await, "bad_key");
    assert!(e.to_string().contains("hmac-sha512"), "{e}");
    assert!(s.dig("app.fleet.test", "A").is_empty());
    assert!(s.dig("_gwhub-a.app.fleet.test", "TXT").is_empty());
}

async fn a_key_without_update_rights_is_refused_or_bad(kind: Kind) {
    let allowed = Key::generate("gwhub-hub", "hmac-sha256");
    let reader = Key::generate("reader", "hmac-sha256");
    let s = Server::start(
        kind,
        &Keys {
            update: vec![allowed],
            known: vec![reader.clone()],
        },
    );
    let c = Client::new(s.addr(), fixed(&reader), TIMEOUT);
    let r = c
        .publish(
            ZONE,
            &a("app.fleet.test", &["192.0.2.1"]),
            &owner("_gwhub-a.app.fleet.test", OURS),
            Expect::Create,
        )
        .await;
    // BIND: REFUSED (allow-update says no). Knot answers an ACL denial as
    // it answers an unknown key: NOTAUTH with TSIG error BADKEY.
    let e = match kind {
        Kind::Bind => assert_label(r, "refused"),
        Kind::Knot => assert_label(r, "bad_key"),
    };
    let text = e.to_string();
    assert!(text.contains("reader"), "{text}");
    match kind {
        Kind::Bind => assert!(text.contains("fleet.test"), "{text}"),
        Kind::Knot => assert!(text.contains("BADKEY"), "{text}"),
    }
    assert!(s.dig("app.fleet.test", "A").is_empty());
}

async fn a_zone_the_server_does_not_serve(kind: Kind) {
    let (s, _key, c) = setup(kind);
    let r = c
        .publish(
            "other.test",
            &a("app.other.test", &["192.0.2.1"]),
            &owner("_gwhub-a.app.other.test", OURS),
            Expect::Create,
        )
        .await;
    let e = r.unwrap_err();
    // BIND answers a signed NOTAUTH (the key is fine, the zone is not
    // served); Knot an unsigned one, which cannot tell the two apart.
    match kind {
        Kind::Bind => assert_eq!(e.label(), "rejected", "{e}"),
        Kind::Knot => assert_eq!(e.label(), "bad_key", "{e}"),
    }
    assert!(e.to_string().contains("NOTAUTH"), "{e}");
    // A read of a name the server does not serve is not authoritative.
    let e = c
        .read("app.other.test", RType::A, "_gwhub-a.app.other.test")
        .await
        .unwrap_err();
    assert_eq!(e.label(), "rejected", "{e}");
    drop(s);
}

async fn a_stopped_server_is_unreachable(kind: Kind) {
    let (mut s, _key, c) = setup(kind);
    s.stop();
    let start = Instant::now();
    let e = c
        .publish(
            ZONE,
            &a("app.fleet.test", &["192.0.2.1"]),
            &owner("_gwhub-a.app.fleet.test", OURS),
            Expect::Create,
        )
        .await
        .unwrap_err();
    assert!(matches!(e.label(), "unreachable" | "timeout"), "{e}");
    assert!(e.to_string().contains(&s.addr().to_string()), "{e}");
    assert!(
        start.elapsed() < TIMEOUT + Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    let e = c
        .read("app.fleet.test", RType::A, "_gwhub-a.app.fleet.test")
        .await
        .unwrap_err();
    assert!(matches!(e.label(), "unreachable" | "timeout"), "{e}");
}

async fn a_rotated_secret_is_picked_up(kind: Kind) {
    let first = Key::generate("gwhub-hub", "hmac-sha256");
    let mut s = Server::start(kind, &Keys::updating(&[&first]));
    let secret = format!("{}\n", first.secret);
    let mut mount = MountedSecret::new(
        &temp_dir(&format!("dns-rotate-{kind:?}")),
        &[("tsig-secret", secret.as_bytes())],
    )
    .unwrap();
    let source = KeySource::file(mount.path("tsig-secret"), Some("gwhub-hub"), None).unwrap();
    let c = Client::new(s.addr(), source.clone(), TIMEOUT);
    let own = owner("_gwhub-a.app.fleet.test", OURS);
    c.publish(
        ZONE,
        &a("app.fleet.test", &["192.0.2.1"]),
        &own,
        Expect::Create,
    )
    .await
    .unwrap();

    // The operator rotates: the server first, then the Secret.
    let second = Key::generate("gwhub-hub", "hmac-sha256");
    s.restart(&Keys::updating(&[&second]));
    assert_label(
        c.publish(
            ZONE,
            &a("app.fleet.test", &["192.0.2.2"]),
            &own,
            Expect::Update,
        )
        .await,
        "bad_key",
    );
    mount
        .swap(&[("tsig-secret", second.secret.as_bytes())])
        .unwrap();
    c.publish(
        ZONE,
        &a("app.fleet.test", &["192.0.2.2"]),
        &own,
        Expect::Update,
    )
    .await
    .unwrap();
    assert_eq!(s.dig("app.fleet.test", "A"), ["192.0.2.2"]);
    assert!(source.reload_error().is_none());

    // A Secret that no longer parses: the last good key stays in use.
    mount
        .swap(&[("tsig-secret", b"this is not base64")])
        .unwrap();
    c.publish(
        ZONE,
        &a("app.fleet.test", &["192.0.2.3"]),
        &own,
        Expect::Update,
    )
    .await
    .unwrap();
    assert_eq!(s.dig("app.fleet.test", "A"), ["192.0.2.3"]);
    let why = source.reload_error().expect("the bad file is reported");
    assert!(
        why.contains("not base64") && why.contains("tsig-secret"),
        "{why}"
    );

    // The next good Secret, as a whole clause this time.
    let third = Key::generate("gwhub-hub", "hmac-sha256");
    s.restart(&Keys::updating(&[&third]));
    mount
        .swap(&[("tsig-secret", third.clause.as_bytes())])
        .unwrap();
    c.publish(
        ZONE,
        &a("app.fleet.test", &["192.0.2.4"]),
        &own,
        Expect::Update,
    )
    .await
    .unwrap();
    assert_eq!(s.dig("app.fleet.test", "A"), ["192.0.2.4"]);
    assert!(source.reload_error().is_none());
}

async fn a_key_clause_file(kind: Kind) {
    for alg in ["hmac-sha512", "hmac-sha384"] {
        let key = Key::generate("gwhub-clause", alg);
        let s = Server::start(kind, &Keys::updating(&[&key]));
        let mount = MountedSecret::new(
            &temp_dir(&format!("dns-clause-{kind:?}-{alg}")),
            &[("tsig.key", key.clause.as_bytes())],
        )
        .unwrap();
        let source = KeySource::file(mount.path("tsig.key"), None, None).unwrap();
        assert_eq!(source.current().algorithm().as_str(), alg);
        let c = Client::new(s.addr(), source, TIMEOUT);
        c.publish(
            ZONE,
            &a("app.fleet.test", &["192.0.2.1"]),
            &owner("_gwhub-a.app.fleet.test", OURS),
            Expect::Create,
        )
        .await
        .unwrap();
        assert_eq!(s.dig("app.fleet.test", "A"), ["192.0.2.1"], "{alg}");
    }
}

async fn a_long_owner_value(kind: Kind) {
    let (s, _key, c) = setup(kind);
    let value = format!(
        "heritage=gwhub,owner=gwhub-system,gateway={}/{}",
        "n".repeat(63),
        "g".repeat(253)
    );
    let own = owner("_gwhub-a.app.fleet.test", &value);
    c.publish(
        ZONE,
        &a("app.fleet.test", &["192.0.2.1"]),
        &own,
        Expect::Create,
    )
    .await
    .unwrap();
    let back = c
        .read("app.fleet.test", RType::A, "_gwhub-a.app.fleet.test")
        .await
        .unwrap();
    assert_eq!(back.txt, [value]);
    // The value-dependent prerequisite matches the split value.
    c.publish(
        ZONE,
        &a("app.fleet.test", &["192.0.2.2"]),
        &own,
        Expect::Update,
    )
    .await
    .unwrap();
    c.delete(ZONE, "app.fleet.test", RType::A, &own)
        .await
        .unwrap();
    assert!(s.dig("_gwhub-a.app.fleet.test", "TXT").is_empty());
}

/// The zone's SOA serial: every UPDATE the server applies raises it by
/// one, so it counts the messages that changed the zone.
fn serial(s: &Server) -> u64 {
    let soa = s.dig(ZONE, "SOA");
    soa.first()
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no SOA serial in {soa:?}"))
}

fn rules_host(h: &str) -> gwhub_dns_rules::Hostname {
    gwhub_dns_rules::Hostname::parse(h).unwrap()
}

fn rules_set(h: &str, data: gwhub_dns_rules::RecordData) -> gwhub_dns_rules::RecordSet {
    gwhub_dns_rules::RecordSet {
        host: rules_host(h),
        ttl_seconds: 30,
        data,
        clusters: vec!["east".into()],
    }
}

/// A whole name's changes (all its types and ownership records) in one
/// UPDATE from its plan: applied together, or, when one prerequisite
/// fails, not at all.
async fn a_whole_name_in_one_update(kind: Kind) {
    use gwhub_dns_rules::{Change, Ownership, RecordData, RecordType, plan};
    let (s, key, c) = setup(kind);
    let ours = Ownership::new("gwhub-system", gwhub_model::GatewayKey::new("apps", "web")).unwrap();
    assert_eq!(ours.value(), OURS);
    let h = "app.fleet.test";
    let a_of = |ips: &[&str]| {
        rules_set(
            h,
            RecordData::A(ips.iter().map(|i| i.parse().unwrap()).collect()),
        )
    };
    let aaaa_of = |ips: &[&str]| {
        rules_set(
            h,
            RecordData::Aaaa(ips.iter().map(|i| i.parse().unwrap()).collect()),
        )
    };
    let send = |changes: Vec<Change>| {
        let p = plan(ZONE, &rules_host(h), &ours, &changes).unwrap();
        let c = &c;
        async move { c.apply(&p).await }
    };

    // A and AAAA created together: one UPDATE.
    let before = serial(&s);
    send(vec![
        Change::Create(a_of(&["192.0.2.1"])),
        Change::Create(aaaa_of(&["2001:db8::1"])),
    ])
    .await
    .unwrap();
    assert_eq!(serial(&s), before + 1);
    assert_eq!(s.dig(h, "A"), ["192.0.2.1"]);
    assert_eq!(s.dig(h, "AAAA"), ["2001:db8::1"]);
    assert_eq!(s.dig("_gwhub-aaaa.app.fleet.test", "TXT"), [OURS]);

    // Both change together: one UPDATE.
    let before = serial(&s);
    send(vec![
        Change::Update {
            set: a_of(&["192.0.2.2"]),
            held: OURS.into(),
        },
        Change::Update {
            set: aaaa_of(&["2001:db8::2"]),
            held: OURS.into(),
        },
    ])
    .await
    .unwrap();
    assert_eq!(serial(&s), before + 1);
    assert_eq!(s.dig(h, "A"), ["192.0.2.2"]);
    assert_eq!(s.dig(h, "AAAA"), ["2001:db8::2"]);

    // A refused prerequisite changes nothing of the name: the AAAA
    // ownership record is no longer ours (someone took it by hand), so
    // the A update that came with it does not happen either.
    s.nsupdate(
        &key,
        &[
            "delete _gwhub-aaaa.app.fleet.test TXT",
            &format!("add _gwhub-aaaa.app.fleet.test 30 TXT \"{THEIRS}\""),
        ],
    );
    let before = serial(&s);
    let e = assert_label(
        send(vec![
            Change::Update {
                set: a_of(&["192.0.2.3"]),
                held: OURS.into(),
            },
            Change::Update {
                set: aaaa_of(&["2001:db8::3"]),
                held: OURS.into(),
            },
        ])
        .await,
        "conflict",
    );
    assert!(e.to_string().contains("nothing was changed"), "{e}");
    assert_eq!(serial(&s), before);
    assert_eq!(s.dig(h, "A"), ["192.0.2.2"]);
    assert_eq!(s.dig(h, "AAAA"), ["2001:db8::2"]);
    assert_eq!(s.dig("_gwhub-a.app.fleet.test", "TXT"), [OURS]);

    // Ours again; A and AAAA give way to a CNAME: one UPDATE, and no
    // moment where the name answers with both or neither.
    s.nsupdate(
        &key,
        &[
            "delete _gwhub-aaaa.app.fleet.test TXT",
            &format!("add _gwhub-aaaa.app.fleet.test 30 TXT \"{OURS}\""),
        ],
    );
    let before = serial(&s);
    send(vec![
        Change::Delete {
            record_type: RecordType::A,
            held: OURS.into(),
        },
        Change::Delete {
            record_type: RecordType::Aaaa,
            held: OURS.into(),
        },
        Change::Create(rules_set(
            h,
            RecordData::Cname(rules_host("lb.example.net")),
        )),
    ])
    .await
    .unwrap();
    assert_eq!(serial(&s), before + 1);
    assert_eq!(s.dig(h, "CNAME"), ["lb.example.net."]);
    assert!(s.dig("_gwhub-a.app.fleet.test", "TXT").is_empty());
    assert!(s.dig("_gwhub-aaaa.app.fleet.test", "TXT").is_empty());
    assert_eq!(s.dig("_gwhub-cname.app.fleet.test", "TXT"), [OURS]);

    // And back from CNAME to A: one UPDATE.
    let before = serial(&s);
    send(vec![
        Change::Create(a_of(&["192.0.2.4"])),
        Change::Delete {
            record_type: RecordType::Cname,
            held: OURS.into(),
        },
    ])
    .await
    .unwrap();
    assert_eq!(serial(&s), before + 1);
    assert!(s.dig(h, "CNAME").is_empty());
    assert_eq!(s.dig(h, "A"), ["192.0.2.4"]);
    assert_eq!(s.dig("_gwhub-a.app.fleet.test", "TXT"), [OURS]);
}

/// Each scenario once against BIND and once against Knot.
macro_rules! on_both_servers {
    ($($scenario:ident),* $(,)?) => {
        mod bind {
            $(
                #[tokio::test]
                async fn $scenario() {
                    if crate::common::available(concat!("bind::", stringify!($scenario))) {
                        crate::servers::$scenario(crate::common::Kind::Bind).await;
                    }
                }
            )*
        }
        mod knot {
            $(
                #[tokio::test]
                async fn $scenario() {
                    if crate::common::available(concat!("knot::", stringify!($scenario))) {
                        crate::servers::$scenario(crate::common::Kind::Knot).await;
                    }
                }
            )*
        }
    };
}

on_both_servers!(
    create_update_delete,
    aaaa_beside_a,
    a_foreign_owner_is_a_conflict,
    records_made_by_hand_are_a_conflict,
    cname,
    wildcard,
    a_wrong_key_is_a_bad_key,
    a_key_without_update_rights_is_refused_or_bad,
    a_zone_the_server_does_not_serve,
    a_stopped_server_is_unreachable,
    a_rotated_secret_is_picked_up,
    a_key_clause_file,
    a_long_owner_value,
    a_whole_name_in_one_update,
);
