//! Helpers the suites of this package share that need the hub's runtime
//! (`gwhub-hub`), which `gwhub-test-kit` deliberately does not link (the
//! rules crates' tests use the kit too and must not build the hub). One
//! home per concept: [`kube_hub`] starts an in-process hub in Kubernetes
//! mode.

pub(crate) mod kube_hub;
