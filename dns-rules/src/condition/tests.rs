use super::*;
use proptest::prelude::*;

fn n(host: &str, state: NameState) -> NameStatus {
    NameStatus {
        host: host.to_owned(),
        state,
    }
}

fn cond(names: &[NameStatus]) -> (&'static str, &'static str, String) {
    let c = dns_published(names).unwrap();
    (c.status, c.reason, c.message)
}

#[test]
fn no_names_no_condition() {
    assert_eq!(dns_published(&[]), None);
}

#[test]
fn the_first_reason_that_applies() {
    use NameState::*;
    let invalid = n(
        "b.example.com",
        Invalid("ownership record name is too long".into()),
    );
    let conflict = n("c.example.com", Conflict("claimed by shop/old".into()));
    let failed = n("d.example.com", WriteFailed("REFUSED".into()));
    let kept = n("e.example.com", NoneEligible { kept: true });
    let deleted = n("a.example.com", NoneEligible { kept: false });
    let ok = n("f.example.com", Published);
    let waiting = n("g.example.com", NotYetPublished);
    type Case = (
        &'static str,
        Vec<NameStatus>,
        (&'static str, &'static str, &'static str),
    );
    let cases: Vec<Case> = vec![
        (
            "Invalid first",
            vec![
                ok.clone(),
                failed.clone(),
                invalid.clone(),
                conflict.clone(),
            ],
            (
                "False",
                "Invalid",
                "cannot be published: b.example.com: ownership record name is too long",
            ),
        ),
        (
            "then Conflict",
            vec![kept.clone(), conflict.clone(), failed.clone()],
            (
                "False",
                "Conflict",
                "held by another: c.example.com: claimed by shop/old",
            ),
        ),
        (
            "then WriteFailed",
            vec![kept.clone(), failed.clone(), ok.clone()],
            (
                "False",
                "WriteFailed",
                "the write failed: d.example.com: REFUSED",
            ),
        ),
        (
            "then NoneEligible, hostnames in order",
            vec![kept.clone(), ok.clone(), deleted.clone(), waiting.clone()],
            (
                "False",
                "NoneEligible",
                "no eligible cluster: a.example.com: deleted; e.example.com: the last published set is kept",
            ),
        ),
        (
            "all published",
            vec![ok.clone(), n("h.example.com", Published)],
            ("True", "Published", "published 2 of 2 hostnames"),
        ),
        (
            "published, naming what no cluster was ever eligible for",
            vec![
                ok.clone(),
                waiting.clone(),
                n("a.example.com", NotYetPublished),
            ],
            (
                "True",
                "Published",
                "published 1 of 3 hostnames; not yet published, no cluster was ever eligible: a.example.com; g.example.com",
            ),
        ),
    ];
    for (what, names, (status, reason, message)) in cases {
        let (s, r, m) = cond(&names);
        assert_eq!((s, r, m.as_str()), (status, reason, message), "{what}");
    }
}

#[test]
fn hostnames_from_elsewhere_are_shown_safely() {
    let (_, _, m) = cond(&[n(
        "a\u{1b}[2J.example.com",
        NameState::Invalid("bad".into()),
    )]);
    assert_eq!(m, "cannot be published: a\\u{1b}[2J.example.com: bad");
}

#[test]
fn messages_are_bounded() {
    let names: Vec<NameStatus> = (0..5_000)
        .map(|i| {
            n(
                &format!("host-{i:05}.example.com"),
                NameState::WriteFailed("SERVFAIL".into()),
            )
        })
        .collect();
    let (_, _, m) = cond(&names);
    assert!(char_len(&m) <= MAX_CONDITION_MESSAGE_LEN, "{}", m.len());
    assert!(m.starts_with("the write failed: host-00000.example.com: SERVFAIL; "));
    let shown = m.matches("SERVFAIL").count();
    assert!(
        m.ends_with(&format!("; and {} more hostnames", 5_000 - shown)),
        "{}",
        &m[m.len() - 60..]
    );
    // A small limit: whole entries, then the count.
    let few = &names[..3];
    let m = dns_published_within(few, 100).unwrap().message;
    assert_eq!(
        m,
        "the write failed: host-00000.example.com: SERVFAIL; and 2 more hostnames"
    );
    // One entry too long on its own is shortened.
    let long = [n("a.example.com", NameState::WriteFailed("x".repeat(500)))];
    let m = dns_published_within(&long, 60).unwrap().message;
    assert!(m.ends_with("xxx..."), "{m}");
    assert_eq!(char_len(&m), 60);
    // True's list of waiting names too.
    let waiting: Vec<NameStatus> = (0..100)
        .map(|i| n(&format!("w{i:03}.example.com"), NameState::NotYetPublished))
        .collect();
    let m = dns_published_within(&waiting, 200).unwrap().message;
    assert!(char_len(&m) <= 200);
    assert!(
        m.starts_with("published 0 of 100 hostnames; not yet published"),
        "{m}"
    );
    assert!(m.ends_with("more hostnames"), "{m}");
}

proptest! {
    /// Whatever the mix and the limit: within the limit, the reason is the
    /// first that applies, and True only when nothing fails.
    #[test]
    fn the_reason_is_the_first_that_applies(
        states in proptest::collection::vec((0u8..6, 0u16..500), 1..60),
        max in 80usize..2_000,
    ) {
        let names: Vec<NameStatus> = states
            .iter()
            .map(|(s, i)| {
                let state = match s {
                    0 => NameState::Published,
                    1 => NameState::NotYetPublished,
                    2 => NameState::NoneEligible { kept: i % 2 == 0 },
                    3 => NameState::WriteFailed("timeout".into()),
                    4 => NameState::Conflict("claimed by a/b".into()),
                    _ => NameState::Invalid("too long".into()),
                };
                n(&format!("h{i}.example.com"), state)
            })
            .collect();
        let c = dns_published_within(&names, max).unwrap();
        prop_assert!(char_len(&c.message) <= max);
        let worst = states.iter().map(|(s, _)| *s).max().unwrap_or(0);
        let want = match worst {
            5 => REASON_INVALID,
            4 => REASON_CONFLICT,
            3 => REASON_WRITE_FAILED,
            2 => REASON_NONE_ELIGIBLE,
            _ => REASON_PUBLISHED,
        };
        prop_assert_eq!(c.reason, want);
        prop_assert_eq!(c.status, if worst >= 2 { "False" } else { "True" });
    }
}

/// Each name state's word and detail, as the Dashboard shows a name.
#[test]
fn each_state_in_a_word_and_its_detail() {
    use NameState::*;
    let cases = [
        (Published, "Published", ""),
        (
            NotYetPublished,
            "NotYetPublished",
            "no cluster was ever eligible",
        ),
        (
            NoneEligible { kept: true },
            "NoneEligible",
            "no eligible cluster: the last published set is kept",
        ),
        (
            NoneEligible { kept: false },
            "NoneEligible",
            "no eligible cluster: the name is deleted",
        ),
        (WriteFailed("REFUSED".into()), "WriteFailed", "REFUSED"),
        (Conflict("owner=x".into()), "Conflict", "owner=x"),
        (Invalid("too long".into()), "Invalid", "too long"),
    ];
    for (state, reason, detail) in cases {
        assert_eq!((state.reason(), state.detail().as_str()), (reason, detail));
    }
}
