//! Helpers the suites of this package share that need the hub's runtime
//! (`gwhub-hub`), which `gwhub-test-kit` deliberately does not link (the
//! rules crates' tests use the kit too and must not build the hub). One
//! home per concept: [`kube_hub`] starts an in-process hub in Kubernetes
//! mode, [`hub_agent`] is the typed test agent of the suites of such a
//! hub, and [`hub_fixtures`] their hub Gateway, statuses and waits.

pub(crate) mod hub_agent;
pub(crate) mod hub_fixtures;
pub(crate) mod hub_secrets;
pub(crate) mod kube_hub;
pub(crate) mod mtls;
