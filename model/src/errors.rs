//! Error text for people: transport errors (tonic, hyper, rustls) print
//! only their outermost layer ("transport error"), the cause is deeper.

/// `e` and each of its sources, joined by `": "`; a source whose text the
/// message already ends with (hyper and tonic often repeat it) is skipped.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct E {
        text: &'static str,
        #[source]
        source: Option<Box<E>>,
    }

    fn e(text: &'static str, source: Option<E>) -> E {
        E {
            text,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn chain_names_every_cause_once() {
        let io = e("connection refused", None);
        let hyper = e("client error (Connect): connection refused", Some(io));
        let tonic = e("transport error", Some(hyper));
        assert_eq!(
            error_chain(&tonic),
            "transport error: client error (Connect): connection refused"
        );
        assert_eq!(error_chain(&e("alone", None)), "alone");
    }
}
