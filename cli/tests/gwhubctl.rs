//! gwhubctl's command line, parsed without a hub (moved from
//! hub/runtime/tests/grpc.rs: the hub runtime's tests do not see the CLI crate).

/// Every gwhubctl command takes `-o json` and `-o yaml`.
#[test]
fn every_gwhubctl_command_takes_output_json_and_yaml() {
    use clap::Parser;
    let commands: [&[&str]; 7] = [
        &["get", "gateways"],
        &["get", "clusters"],
        &["get", "dns"],
        &["dns", "plan"],
        &["describe", "gateway", "ns/name"],
        &["watch"],
        &["history", "ns/name"],
    ];
    for cmd in commands {
        for format in ["json", "yaml"] {
            let mut argv = vec!["gwhubctl"];
            argv.extend_from_slice(cmd);
            argv.extend(["-o", format]);
            if let Err(e) = gwhub::ctl::Cli::try_parse_from(&argv) {
                panic!("{argv:?}: {e}");
            }
        }
    }
    // With no --server, the Dashboard where `gwhub serve` listens by default.
    let cli = gwhub::ctl::Cli::try_parse_from(["gwhubctl", "watch"]).unwrap();
    assert_eq!(cli.server, "http://127.0.0.1:7444");
}
