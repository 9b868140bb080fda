//! Unit tests of `web`, in their own file so the module itself reads in
//! one sitting.

use super::*;
use gwhub_proto::v1;

/// The page and the CLI get the same fields; only the time's key and
/// form are theirs, and a condition that appears has no previous
/// status ("").
#[test]
fn a_transition_is_one_json_shape_with_its_own_time() {
    let t = v1::GatewayTransition {
        time_millis: 1_700_000_000_000,
        cluster: "east".into(),
        condition_type: "Programmed".into(),
        status: v1::ConditionStatus::False as i32,
        reason: "Pending".into(),
        ..Default::default()
    };
    let page = transition_json(&t, "timeMillis", json!(t.time_millis));
    let cli = transition_json(&t, "time", json!("2023-11-14T22:13:20Z"));
    assert_eq!(page["timeMillis"], 1_700_000_000_000_i64);
    assert_eq!(cli["time"], "2023-11-14T22:13:20Z");
    assert_eq!(page["status"], "False");
    assert_eq!(page["previousStatus"], "");
    let fields = |v: &Value| -> Vec<String> {
        v.as_object()
            .unwrap()
            .keys()
            .filter(|k| !k.starts_with("time"))
            .cloned()
            .collect()
    };
    assert_eq!(fields(&page), fields(&cli));
    assert_eq!(fields(&page).len(), 7);
}

#[test]
fn tokens_come_from_the_header_or_the_cookie() {
    let h = |pairs: &[(&'static str, &str)]| {
        let mut m = http::HeaderMap::new();
        for (k, v) in pairs {
            m.append(*k, http::HeaderValue::from_str(v).unwrap());
        }
        m
    };
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
    let cases: &[Case<'_>] = &[
        (&[], None),
        (&[("authorization", "Bearer abc")], Some("abc")),
        (&[("authorization", "Basic abc")], None),
        (&[("cookie", "a=1; gwhub_token=xyz; b=2")], Some("xyz")),
        (&[("cookie", "gwhub_tokenx=1")], None),
        // As the page writes it: encodeURIComponent of a base64 token.
        (
            &[("cookie", "gwhub_token=a%2Bb%2Fc%3D%3D")],
            Some("a+b/c=="),
        ),
        (&[("cookie", "a=1"), ("cookie", "gwhub_token=q")], Some("q")),
        (
            &[("authorization", "Bearer h"), ("cookie", "gwhub_token=c")],
            Some("h"),
        ),
    ];
    for (pairs, want) in cases {
        assert_eq!(token_of(&h(pairs)).as_deref(), *want, "{pairs:?}");
    }
}

/// The page escapes exactly the characters gwhubctl does: its
/// character class is the Rust rule's, written out.
#[test]
fn the_pages_printable_escapes_what_gwhubctl_does() {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for c in (0..=0x10_ffff_u32).filter_map(char::from_u32) {
        if !gwhub_model::text::is_unsafe_char(c) {
            continue;
        }
        let c = c as u32;
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == c => *end = c,
            _ => ranges.push((c, c)),
        }
    }
    let class: String = ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                format!("\\u{a:04x}")
            } else {
                format!("\\u{a:04x}-\\u{b:04x}")
            }
        })
        .collect();
    let want = format!("const UNSAFE_CHARS = /[{class}]/g;");
    assert!(APP_JS.contains(&want), "app.js must say: {want}");
}

/// And writes the escapes as Rust does (run with node where present).
#[test]
fn the_pages_printable_agrees_with_gwhubctls() {
    let start = APP_JS.find("const UNSAFE_CHARS").unwrap();
    let end = start + APP_JS[start..].find("\n}\n").unwrap() + 3;
    let inputs = [
        "east",
        "a\u{1b}[2Jb\u{7}\r\n\tfake-row\u{202e}",
        "\u{2066}x\u{2069}\u{200e}\u{200f}\u{61c}\u{0}\u{7f}\u{9f}\u{a0}",
        "héllo \"中\" \\ \u{1F600}",
    ];
    let script = format!(
        "{}\nprocess.stdout.write(JSON.stringify({}.map(printable)));",
        &APP_JS[start..end],
        serde_json::to_string(&inputs).unwrap()
    );
    let Ok(out) = std::process::Command::new("node")
        .arg("-e")
        .arg(&script)
        .output()
    else {
        eprintln!("skipped: no node to run app.js's printable");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    let want: Vec<String> = inputs
        .iter()
        .map(|s| gwhub_model::text::printable(s).into_owned())
        .collect();
    assert_eq!(got, want);
}

#[test]
fn filters_from_the_query() {
    let q = |s: &str| query(&format!("/api/fleet?{s}").parse().unwrap());
    assert_eq!(filter_of(&q("")), Filter::default());
    assert_eq!(
        filter_of(&q("namespace=openshift-ingress&cluster=east&not_ready=1")),
        Filter::new("openshift-ingress", "east", true)
    );
    assert_eq!(
        filter_of(&q("cluster=a%2Fb&not_ready=0")),
        Filter::new("", "a/b", false)
    );
}
