//! Unit tests of `join`, in their own file so the module itself reads in
//! one sitting.

use super::*;

/// A Joiner whose API server cannot be reached: every call that gets
/// past the limits fails UNAVAILABLE.
fn unreachable_joiner() -> Joiner {
    let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let client = Client::try_from(config).unwrap();
    Joiner::new(client, "gwhub-system", Duration::from_secs(3600))
}

/// Made-up tokens (malformed, or well-formed with an id no Secret
/// has) are refused from memory: the API server, unreachable here, is
/// never asked (UNAUTHENTICATED, not UNAVAILABLE), and no budget is
/// spent: the known token still gets through to the API server.
#[tokio::test]
async fn made_up_tokens_are_refused_from_memory_and_spend_nothing() {
    let real = JoinToken::generate().unwrap();
    let joiner = unreachable_joiner().with_known_tokens(KnownTokens::of([real.id.clone()]));
    let peer: Option<IpAddr> = Some("10.0.0.9".parse().unwrap());
    let join = |token: String| {
        let joiner = &joiner;
        async move {
            joiner
                .join(
                    peer,
                    v1::JoinRequest {
                        cluster: "east".into(),
                        token,
                        csr_pem: String::new(),
                    },
                )
                .await
                .unwrap_err()
                .code()
        }
    };
    for i in 0..200 {
        let token = if i % 2 == 0 {
            "not a token".to_owned()
        } else {
            JoinToken::generate().unwrap().reveal()
        };
        assert_eq!(join(token).await, tonic::Code::Unauthenticated);
    }
    assert_eq!(join(real.reveal()).await, tonic::Code::Unavailable);
}

/// Until the token Secrets are listed a token is asked to come back.
#[tokio::test]
async fn tokens_wait_for_the_first_list() {
    let joiner = unreachable_joiner();
    let e = joiner
        .join(
            None,
            v1::JoinRequest {
                cluster: "east".into(),
                token: JoinToken::generate().unwrap().reveal(),
                csr_pem: String::new(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
}

#[tokio::test]
async fn renewals_are_limited_per_cluster() {
    let joiner = unreachable_joiner();
    let renew = |cluster: &'static str| {
        let joiner = &joiner;
        async move {
            joiner
                .renew(cluster, &[], v1::RenewRequest::default())
                .await
                .unwrap_err()
                .code()
        }
    };
    for _ in 0..RENEW_PER_CLUSTER_PER_MINUTE {
        assert_eq!(renew("east").await, tonic::Code::Unavailable);
    }
    assert_eq!(renew("east").await, tonic::Code::ResourceExhausted);
    // Another cluster is not held back by east.
    assert_eq!(renew("west").await, tonic::Code::Unavailable);
}
