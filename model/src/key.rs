//! The identity shared by the agent and the hub: a Gateway's `namespace/name`.

use std::fmt;

use gateway_api::apis::standard::gateways::Gateway;

/// A Gateway's identity. The hub aggregates the Gateways with the same key in
/// every cluster onto the hub Gateway with that key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GatewayKey {
    pub namespace: String,
    pub name: String,
}

impl GatewayKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of a Gateway object (`default` namespace when unset, as the
    /// API server would place it).
    pub fn of(gw: &Gateway) -> Self {
        Self::new(
            gw.metadata.namespace.as_deref().unwrap_or("default"),
            gw.metadata.name.as_deref().unwrap_or_default(),
        )
    }
}

impl fmt::Display for GatewayKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
