//! Log set-up shared by `gwhub` and `gwhub-agent`: text on stderr by default,
//! one JSON object per line with `GWHUB_LOG_FORMAT=json` (for log pipelines);
//! `RUST_LOG` picks the level. With `--otlp-endpoint` the same `tracing`
//! spans are also exported as OpenTelemetry traces (OTLP over gRPC), and
//! [`traceparent`] / [`set_parent`] carry a trace from the agent's reconcile
//! to the hub's write through the report stream (W3C trace context).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Whether spans are exported (an `--otlp-endpoint` was set up): without
/// it, [`traceparent`] and [`set_parent`] cost nothing.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Installs the global subscriber; a second call (tests) is a no-op.
pub fn init(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if std::env::var("GWHUB_LOG_FORMAT").is_ok_and(|v| v == "json") {
        builder.json().try_init()
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
}

/// Why span export could not start.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error("--otlp-endpoint {endpoint:?}: expected an http:// or https:// URL")]
    BadEndpoint { endpoint: String },
    #[error("--otlp-endpoint {endpoint:?}: {message}")]
    Exporter { endpoint: String, message: String },
}

/// Flushes and stops span export when dropped (at process exit); holds
/// nothing when export is off.
#[must_use = "dropping the guard stops span export"]
pub struct OtlpGuard(Option<SdkTracerProvider>);

impl Drop for OtlpGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.0.take() {
            // The batch exporter runs on its own thread but its gRPC calls
            // need the runtime: keep this worker from blocking it.
            let shutdown = move || {
                if let Err(e) = provider.shutdown_with_timeout(Duration::from_secs(5)) {
                    eprintln!("gwhub: flushing traces: {e}");
                }
            };
            match tokio::runtime::Handle::try_current() {
                Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                    tokio::task::block_in_place(shutdown)
                }
                _ => shutdown(),
            }
        }
    }
}

/// [`init`], plus, with an `otlp_endpoint`, export of this process's spans
/// (gwhub's own, at info and above) as service `service_name` to that OTLP
/// gRPC endpoint, batched (the standard `OTEL_BSP_*` variables tune the
/// batches). Without an endpoint nothing is exported and no exporter exists.
/// Must be called inside a Tokio runtime when an endpoint is given.
pub fn init_with_otlp(
    default_level: &str,
    service_name: &'static str,
    otlp_endpoint: Option<&str>,
) -> Result<OtlpGuard, OtlpError> {
    let Some(endpoint) = otlp_endpoint else {
        init(default_level);
        return Ok(OtlpGuard(None));
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(OtlpError::BadEndpoint {
            endpoint: endpoint.to_string(),
        });
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| OtlpError::Exporter {
            endpoint: endpoint.to_string(),
            message: e.to_string(),
        })?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service_name)
                .build(),
        )
        .build();
    let tracer = provider.tracer(service_name);
    // gwhub's spans only: the libraries' (h2, tower, kube) would drown them.
    let exported = Targets::new()
        .with_target("gwhub", LevelFilter::INFO)
        .with_default(LevelFilter::OFF);
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let json = std::env::var("GWHUB_LOG_FORMAT").is_ok_and(|v| v == "json");
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if json {
        fmt.json().with_filter(filter).boxed()
    } else {
        fmt.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(filter)
            .boxed()
    };
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(exported);
    if tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()
        .is_ok()
    {
        EXPORTING.store(true, Ordering::Relaxed);
    }
    Ok(OtlpGuard(Some(provider)))
}

/// The current span's W3C `traceparent`, or "" when it is not exported
/// (no `--otlp-endpoint`, or outside any span).
pub fn traceparent() -> String {
    if !EXPORTING.load(Ordering::Relaxed) {
        return String::new();
    }
    let cx = tracing::Span::current().context();
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent").unwrap_or_default()
}

/// Makes `span` a child of the remote span named by a W3C `traceparent`
/// (from [`traceparent`] on the other side); an empty or malformed one
/// leaves `span` a root.
pub fn set_parent(span: &tracing::Span, traceparent: &str) {
    if traceparent.is_empty() || !EXPORTING.load(Ordering::Relaxed) {
        return;
    }
    let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(cx);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_export_no_traceparent() {
        assert_eq!(traceparent(), "");
        set_parent(&tracing::Span::none(), "00-bad");
    }

    #[test]
    fn bad_endpoint_is_named() {
        let e = init_with_otlp("info", "t", Some("collector:4317"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("\"collector:4317\""), "{e}");
    }
}
