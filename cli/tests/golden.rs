//! Golden tests: `gwhub-agent compute` on every directory under `spoke-agent/examples/`
//! with a fixed `--now`, compared with the committed files in
//! `tests/golden/<example>/` (kept out of the example directories so that
//! `-f examples/<example>` reads inputs only). Regenerate with
//! `GWHUB_BLESS=1 cargo test -p gwhub --test integration golden::`.

use std::path::{Path, PathBuf};
use std::process::Command;

const NOW: &str = "2026-01-12T10:00:00Z";

fn examples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spoke-agent/examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 4, "examples missing under {}", root.display());
    dirs
}

fn check(expected: &Path, actual: &str, failures: &mut Vec<String>) {
    if std::env::var_os("GWHUB_BLESS").is_some() {
        std::fs::create_dir_all(expected.parent().unwrap()).unwrap();
        if actual.is_empty() {
            let _ = std::fs::remove_file(expected);
        } else {
            std::fs::write(expected, actual).unwrap();
        }
        return;
    }
    let want = std::fs::read_to_string(expected).unwrap_or_default();
    if want != actual {
        failures.push(format!(
            "{} differs (GWHUB_BLESS=1 regenerates)\n--- expected\n{want}\n--- actual\n{actual}",
            expected.display()
        ));
    }
}

#[test]
fn examples_match_golden_output() {
    let mut failures = Vec::new();
    for dir in examples() {
        for (format, file) in [("yaml", "compute.yaml"), ("json", "compute.json")] {
            let out = Command::new(env!("CARGO_BIN_EXE_gwhub-agent"))
                .args(["compute", "-f"])
                .arg(&dir)
                .args(["--now", NOW, "-o", format])
                .output()
                .unwrap();
            let stderr = String::from_utf8(out.stderr).unwrap();
            assert!(out.status.success(), "{}: {stderr}", dir.display());
            let expected = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/golden")
                .join(dir.file_name().unwrap());
            check(
                &expected.join(file),
                &String::from_utf8(out.stdout).unwrap(),
                &mut failures,
            );
            check(&expected.join("warnings.txt"), &stderr, &mut failures);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The output is a valid input: computing again at a later time changes no
/// condition and keeps every transition time (nothing but time would change).
#[test]
fn output_is_a_fixed_point() {
    for dir in examples() {
        let first = Command::new(env!("CARGO_BIN_EXE_gwhub-agent"))
            .args(["compute", "-f"])
            .arg(&dir)
            .args(["--now", NOW])
            .output()
            .unwrap();
        assert!(first.status.success());
        let tmp = std::env::temp_dir().join(format!(
            "gwhub-agent-fixpoint-{}-{}",
            std::process::id(),
            dir.file_name().unwrap().to_string_lossy()
        ));
        std::fs::create_dir_all(&tmp).unwrap();
        // Everything but the Gateways, plus the computed Gateways.
        for f in std::fs::read_dir(&dir).unwrap() {
            let p = f.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, tmp.join(p.file_name().unwrap())).unwrap();
            }
        }
        for f in std::fs::read_dir(&tmp).unwrap() {
            let p = f.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            if text.contains("kind: Gateway\n") {
                // Keep only non-Gateway documents of this file.
                let kept: Vec<&str> = text
                    .split("\n---\n")
                    .filter(|d| !d.contains("kind: Gateway\n"))
                    .collect();
                std::fs::write(&p, kept.join("\n---\n")).unwrap();
            }
        }
        std::fs::write(tmp.join("zz-computed.yaml"), &first.stdout).unwrap();
        let second = Command::new(env!("CARGO_BIN_EXE_gwhub-agent"))
            .args(["compute", "-f"])
            .arg(&tmp)
            .args(["--now", "2026-02-01T00:00:00Z"])
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&tmp);
        assert!(
            second.status.success(),
            "{}",
            String::from_utf8_lossy(&second.stderr)
        );
        assert_eq!(
            String::from_utf8(first.stdout).unwrap(),
            String::from_utf8(second.stdout).unwrap(),
            "{}",
            dir.display()
        );
    }
}
