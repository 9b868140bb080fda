//! A small loopback TCP proxy for fault tests: it passes traffic, stalls it
//! (connections stay open, no byte moves either way, new connections are
//! accepted and stall too, like a black-holed network path), or cuts every
//! open connection at once (as a dropped NAT entry or a restarted load
//! balancer would).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Stall,
}

#[derive(Debug)]
struct Control {
    mode: watch::Sender<Mode>,
    /// Bumped by [`Proxy::cut`]; every connection older than it ends.
    cuts: watch::Sender<u64>,
    accepted: AtomicU64,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    pub addr: SocketAddr,
    control: Arc<Control>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let control = Arc::new(Control {
            mode: watch::channel(Mode::Pass).0,
            cuts: watch::channel(0).0,
            accepted: AtomicU64::new(0),
        });
        let c = control.clone();
        let task = tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                c.accepted.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(connection(down, target, c.clone()));
            }
        });
        Ok(Proxy {
            addr,
            control,
            task,
        })
    }

    /// `http://addr`, for a gRPC client.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_mode(&self, mode: Mode) {
        self.control.mode.send_replace(mode);
    }

    /// Closes every open connection (both sides see the TCP close).
    pub fn cut(&self) {
        self.control.cuts.send_modify(|n| *n += 1);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.control.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

async fn connection(down: TcpStream, target: SocketAddr, control: Arc<Control>) {
    let mut cuts = control.cuts.subscribe();
    cuts.mark_unchanged();
    let Ok(up) = TcpStream::connect(target).await else {
        return;
    };
    let _ = down.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let (down_r, down_w) = down.into_split();
    let (up_r, up_w) = up.into_split();
    let a = pump(down_r, up_w, control.mode.subscribe());
    let b = pump(up_r, down_w, control.mode.subscribe());
    tokio::select! {
        _ = cuts.changed() => {}
        _ = async { tokio::join!(a, b) } => {}
    }
}

/// Copies `from` to `to`, holding every chunk while the mode is Stall.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // Stalled: read nothing, so the sender's windows fill as on a dead path.
        if mode.wait_for(|m| *m == Mode::Pass).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if mode.wait_for(|m| *m == Mode::Pass).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
