//! The readers' counters: TokenReviews sent and readers refused without
//! one. They live beside the reviews because only they bump them; the
//! runtime registers them on `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// The `result` label of `gwhub_dashboard_token_reviews`: `authenticated`,
/// `unauthenticated` or `error` (no answer from the API server).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewResult {
    pub result: &'static str,
}

/// The `limit` label of `gwhub_dashboard_token_reviews_refused`: `rate`
/// or `in_flight` ([`super::ReviewLimit`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLimitLabel {
    pub limit: &'static str,
}

gwhub_common::metrics! {
    /// TokenReviews and refusals of `--dashboard-auth=kubernetes`, served
    /// on `/metrics`.
    #[derive(Debug)]
    pub struct ReviewCounters {
        /// TokenReviews sent for readers (`--dashboard-auth=kubernetes`),
        /// by [`ReviewResult`].
        pub token_reviews: Family<ReviewResult, Counter> => "gwhub_dashboard_token_reviews",
            "TokenReviews sent for Dashboard and web page readers, by result (authenticated, unauthenticated, error).",
        /// Readers refused without a TokenReview, by [`ReviewLimitLabel`].
        pub token_reviews_refused: Family<ReviewLimitLabel, Counter> =>
            "gwhub_dashboard_token_reviews_refused",
            "Readers refused without a TokenReview, by limit (rate: 10 a second, burst 50; in_flight: 4 at once).",
    }
}

impl Default for ReviewCounters {
    fn default() -> Self {
        // Every label shown from the start, at 0.
        let token_reviews: Family<ReviewResult, Counter> = Family::default();
        for result in ["authenticated", "unauthenticated", "error"] {
            let _ = token_reviews.get_or_create(&ReviewResult { result });
        }
        let token_reviews_refused: Family<ReviewLimitLabel, Counter> = Family::default();
        for limit in ["rate", "in_flight"] {
            let _ = token_reviews_refused.get_or_create(&ReviewLimitLabel { limit });
        }
        ReviewCounters {
            token_reviews,
            token_reviews_refused,
        }
    }
}

impl ReviewCounters {
    /// TokenReviews sent with `result` (`authenticated`, `unauthenticated`,
    /// `error`).
    pub fn token_reviews(&self, result: &'static str) -> u64 {
        self.token_reviews
            .get_or_create(&ReviewResult { result })
            .get()
    }

    /// Readers refused for `limit` (`rate`, `in_flight`) without a review.
    pub fn token_reviews_refused(&self, limit: &'static str) -> u64 {
        self.token_reviews_refused
            .get_or_create(&ReviewLimitLabel { limit })
            .get()
    }
}
