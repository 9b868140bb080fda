//! Answers no real server gives: garbage, another request's, unsigned or
//! forged successes, silence, a closed connection. Each must come back as
//! an error (never a panic, never a success), in time. A scripted TCP
//! server on loopback plays the part; no DNS server is needed.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gwhub_dns_rfc2136::{
    Algorithm, Client, Error, Expect, KeySource, Owner, RType, RecordSet, TsigKey,
};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::tsig::{TsigAlgorithm, TsigError};
use hickory_proto::rr::{Name, TSigResponseContext, TSigner};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

/// What the scripted server does with a request.
enum Reply {
    /// Sends these bytes as one framed message.
    Frame(Vec<u8>),
    /// Sends these raw bytes (framing included or not) and closes.
    Raw(Vec<u8>),
    /// Holds the connection open without answering.
    Silence,
    /// Closes at once.
    Close,
}

/// Serves one connection: reads one framed request, replies per `script`.
async fn serve(script: impl FnOnce(Vec<u8>) -> Reply + Send + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let mut len = [0u8; 2];
        if sock.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut request = vec![0u8; u16::from_be_bytes(len) as usize];
        if sock.read_exact(&mut request).await.is_err() {
            return;
        }
        match script(request) {
            Reply::Frame(bytes) => {
                let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
                framed.extend(bytes);
                let _ = sock.write_all(&framed).await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            Reply::Raw(bytes) => {
                let _ = sock.write_all(&bytes).await;
            }
            Reply::Silence => tokio::time::sleep(Duration::from_secs(30)).await,
            Reply::Close => {}
        }
    });
    addr
}

fn key() -> TsigKey {
    TsigKey::new("gwhub-hub", Algorithm::HmacSha256, SECRET.to_vec()).unwrap()
}

fn client(addr: SocketAddr, timeout: Duration) -> Client {
    Client::new(addr, KeySource::fixed(key()), timeout)
}

async fn publish(c: &Client) -> Result<(), Error> {
    c.publish(
        "fleet.test",
        &RecordSet {
            name: "app.fleet.test".into(),
            rtype: RType::A,
            ttl: 30,
            values: vec!["192.0.2.1".into()],
        },
        &Owner {
            txt_name: "_gwhub-a.app.fleet.test".into(),
            txt_value: "heritage=gwhub,owner=x,gateway=a/b".into(),
        },
        Expect::Create,
    )
    .await
}

/// The response a server would send to `request` with `rcode`, signed
/// with `secret` under the request's key (or unsigned).
fn response(request: &[u8], rcode: ResponseCode, secret: Option<&[u8]>) -> Vec<u8> {
    response_with(request, rcode, secret, None)
}

fn response_with(
    request: &[u8],
    rcode: ResponseCode,
    secret: Option<&[u8]>,
    tsig_error: Option<TsigError>,
) -> Vec<u8> {
    let req = Message::from_vec(request).unwrap();
    let mut resp = Message::response(req.metadata.id, req.metadata.op_code);
    resp.metadata.message_type = MessageType::Response;
    resp.metadata.response_code = rcode;
    resp.metadata.authoritative = true;
    resp.queries = req.queries.clone();
    let Some(secret) = secret else {
        return resp.to_vec().unwrap();
    };
    let sig = req.signature().expect("a signed request");
    let signer = TSigner::new(
        secret.to_vec(),
        TsigAlgorithm::HmacSha256,
        Name::from_ascii("gwhub-hub.").unwrap(),
        300,
    )
    .unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let unsigned = resp.to_vec().unwrap();
    let ctx = TSigResponseContext::new(
        req.metadata.id,
        now,
        signer,
        sig.data.mac.clone(),
        tsig_error,
    );
    resp.set_signature(ctx.sign(&unsigned).unwrap());
    resp.to_vec().unwrap()
}

#[track_caller]
fn expect_label(r: Result<(), Error>, label: &str) -> String {
    match r {
        Err(e) if e.label() == label => e.to_string(),
        other => panic!("expected {label}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_correctly_signed_answer_is_believed() {
    let addr = serve(|req| Reply::Frame(response(&req, ResponseCode::NoError, Some(SECRET)))).await;
    publish(&client(addr, Duration::from_secs(5)))
        .await
        .unwrap();
    let addr = serve(|req| Reply::Frame(response(&req, ResponseCode::YXRRSet, Some(SECRET)))).await;
    expect_label(
        publish(&client(addr, Duration::from_secs(5))).await,
        "conflict",
    );
}

#[tokio::test]
async fn a_tsig_error_is_a_bad_key() {
    // BADTIME comes signed (RFC 8945 5.2.3): the clocks are too far apart.
    let addr = serve(|req| {
        Reply::Frame(response_with(
            &req,
            ResponseCode::NotAuth,
            Some(SECRET),
            Some(TsigError::BadTime),
        ))
    })
    .await;
    let e = expect_label(
        publish(&client(addr, Duration::from_secs(5))).await,
        "bad_key",
    );
    assert!(
        e.contains("BADTIME") && e.contains("gwhub-hub") && e.contains("hmac-sha256"),
        "{e}"
    );
}

#[tokio::test]
async fn a_forged_or_unsigned_success_is_a_bad_answer() {
    let addr = serve(|req| {
        Reply::Frame(response(
            &req,
            ResponseCode::NoError,
            Some(b"another secret, another secret!!"),
        ))
    })
    .await;
    let e = expect_label(
        publish(&client(addr, Duration::from_secs(5))).await,
        "bad_answer",
    );
    assert!(
        e.contains("does not verify") && e.contains("gwhub-hub"),
        "{e}"
    );
    let addr = serve(|req| Reply::Frame(response(&req, ResponseCode::NoError, None))).await;
    let e = expect_label(
        publish(&client(addr, Duration::from_secs(5))).await,
        "bad_answer",
    );
    assert!(e.contains("not signed"), "{e}");
    // An unsigned failure can only stop a write: it is believed.
    let addr = serve(|req| Reply::Frame(response(&req, ResponseCode::Refused, None))).await;
    expect_label(
        publish(&client(addr, Duration::from_secs(5))).await,
        "refused",
    );
    let addr = serve(|req| Reply::Frame(response(&req, ResponseCode::NotAuth, None))).await;
    expect_label(
        publish(&client(addr, Duration::from_secs(5))).await,
        "bad_key",
    );
    let addr = serve(|req| Reply::Frame(response(&req, ResponseCode::ServFail, None))).await;
    let e = expect_label(
        publish(&client(addr, Duration::from_secs(5))).await,
        "rejected",
    );
    assert!(e.contains("SERVFAIL"), "{e}");
}

#[tokio::test]
async fn another_requests_answer_is_a_bad_answer() {
    let addr = serve(|req| {
        let mut bytes = response(&req, ResponseCode::NoError, Some(SECRET));
        bytes[0] ^= 0xff;
        Reply::Frame(bytes)
    })
    .await;
    let e = expect_label(
        publish(&client(addr, Duration::from_secs(5))).await,
        "bad_answer",
    );
    assert!(e.contains("another request"), "{e}");
    // The request itself sent back: not a response.
    let addr = serve(Reply::Frame).await;
    expect_label(
        publish(&client(addr, Duration::from_secs(5))).await,
        "bad_answer",
    );
}

#[tokio::test]
async fn garbage_is_a_bad_answer_never_a_panic() {
    // A fixed-seed generator: the same garbage every run.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..200 {
        let len = (next() % 300) as usize;
        let mut junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let keep_id = round % 2 == 0;
        let addr = serve(move |req| {
            // Half the rounds carry the request's id, to get past that check.
            if keep_id && junk.len() >= 2 {
                junk[..2].copy_from_slice(&req[..2]);
            }
            Reply::Frame(junk)
        })
        .await;
        let r = publish(&client(addr, Duration::from_secs(2))).await;
        let e = r.expect_err("garbage is never a success");
        // An empty frame is no message at all: hickory's TCP stream waits
        // on for one, so the timeout ends it.
        let allowed: &[&str] = if len == 0 {
            &["timeout"]
        } else {
            &["bad_answer", "unreachable"]
        };
        assert!(allowed.contains(&e.label()), "round {round}: {e:?}");
    }
}

#[tokio::test]
async fn silence_is_a_timeout_and_a_closed_connection_an_error() {
    let addr = serve(|_| Reply::Silence).await;
    let start = Instant::now();
    let e = expect_label(
        publish(&client(addr, Duration::from_millis(500))).await,
        "timeout",
    );
    assert!(e.contains(&addr.to_string()), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );

    let addr = serve(|_| Reply::Close).await;
    let r = publish(&client(addr, Duration::from_secs(5))).await;
    let e = r.unwrap_err();
    assert!(matches!(e.label(), "bad_answer" | "unreachable"), "{e:?}");

    // A frame cut short: its length says 100, 10 bytes come, then EOF.
    let addr = serve(|_| {
        let mut bytes = 100u16.to_be_bytes().to_vec();
        bytes.extend([0u8; 10]);
        Reply::Raw(bytes)
    })
    .await;
    let e = publish(&client(addr, Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert!(matches!(e.label(), "bad_answer" | "unreachable"), "{e:?}");

    // Nothing listening: refused at once.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let start = Instant::now();
    let e = expect_label(
        publish(&client(addr, Duration::from_secs(10))).await,
        "unreachable",
    );
    assert!(e.contains(&addr.to_string()), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_read_rejects_bad_answers_too() {
    let addr = serve(|_| Reply::Frame(b"\x00\x01garbage".to_vec())).await;
    let r = client(addr, Duration::from_secs(5))
        .read("app.fleet.test", RType::A, "_gwhub-a.app.fleet.test")
        .await;
    assert_eq!(r.unwrap_err().label(), "bad_answer");
    // A non-authoritative answer (a resolver, not the zone's server).
    let addr = serve(|req| {
        let mut m = Message::from_vec(&req).unwrap();
        m.metadata.message_type = MessageType::Response;
        Reply::Frame(m.to_vec().unwrap())
    })
    .await;
    let r = client(addr, Duration::from_secs(5))
        .read("app.fleet.test", RType::A, "_gwhub-a.app.fleet.test")
        .await;
    let e = r.unwrap_err();
    assert_eq!(e.label(), "rejected", "{e}");
    assert!(e.to_string().contains("not authoritative"), "{e}");
}
