//! One HTTP/2 connection of the native gRPC transport.
//!
//! Theory of operation. [`serve_connection`] does the HTTP/2 handshake (with the server's windows,
//! frame size, header list and stream limits), then accepts streams, each served by its own task
//! ([`crate::grpc_stream::serve_stream`]), while a ticker keeps the connection's timers: a
//! keepalive ping when the peer has been quiet for the keepalive time (no answer within as long:
//! the connection is closed, as grpc's keepalive does), GOAWAY once no call has been in progress
//! for the idle timeout, and GOAWAY when the server stops; after GOAWAY a connection with no
//! stream left is closed within [`GOAWAY_GRACE`]. On a TLS port the TLS handshake comes first
//! (with the configuration current when the connection was accepted); it and the HTTP/2 preface
//! share one deadline, so a peer that stalls or fails either holds its slot that long at most.

use crate::grpc_server::{Held, Shared};
use crate::grpc_stream::serve_stream;
use bytes::Bytes;
use h2::Ping;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

/// HTTP/2 flow-control windows the server grants (the spec's default is 64 KiB).
const STREAM_WINDOW_BYTES: u32 = 1 << 20;
const CONNECTION_WINDOW_BYTES: u32 = 8 << 20;
const MAX_FRAME_BYTES: u32 = 1 << 16;
/// grpc's default hard limit of metadata per call.
const MAX_HEADER_LIST_BYTES: u32 = 16 << 10;
/// What h2 may hold for one stream beyond what the peer's window has taken.
const SEND_BUFFER_BYTES: usize = 1 << 20;
/// A connection that has not finished its TLS handshake and HTTP/2 preface by then is closed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Fastest check of a connection's keepalive and idle timers.
pub(crate) const MIN_TICK: Duration = Duration::from_millis(50);
/// After GOAWAY, a connection with no stream left is closed this soon even if the peer never
/// answers the shutdown's ping (grpc closes idle connections outright).
const GOAWAY_GRACE: Duration = Duration::from_secs(1);
/// Streams reset by clients faster than served (rapid reset) before the connection is closed.
const MAX_PENDING_ACCEPT_RESETS: usize = 200;

pub(crate) async fn serve_connection(
    shared: Arc<Shared>,
    sock: tokio::net::TcpStream,
    peer: SocketAddr,
) {
    let _held = Held(&shared.connections, 1);
    let peer: Arc<str> = match peer {
        SocketAddr::V4(a) => format!("ipv4:{a}"),
        SocketAddr::V6(a) => format!("ipv6:{a}"),
    }
    .into();
    let l = &shared.limits;
    // a connection that never completes its handshakes is idle too: the idle timeout holds for it as well
    let handshake = l
        .idle_timeout
        .map_or(HANDSHAKE_TIMEOUT, |idle| idle.min(HANDSHAKE_TIMEOUT));
    let deadline = Instant::now() + handshake;
    match shared.tls.as_ref() {
        None => serve_http2(&shared, sock, peer, deadline).await,
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
            // a failed, refused or stalled handshake ends this connection only
            if let Ok(Ok(stream)) = tokio::time::timeout_at(deadline, acceptor.accept(sock)).await {
                serve_http2(&shared, stream, peer, deadline).await;
            }
        }
    }
}

/// HTTP/2 over `io` (a TCP or TLS stream) until the connection ends; `deadline`: of its preface.
async fn serve_http2<T: AsyncRead + AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    io: T,
    peer: Arc<str>,
    deadline: Instant,
) {
    let l = &shared.limits;
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(l.max_streams)
        .initial_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .max_header_list_size(MAX_HEADER_LIST_BYTES)
        .max_send_buffer_size(SEND_BUFFER_BYTES)
        .max_pending_accept_reset_streams(MAX_PENDING_ACCEPT_RESETS);
    let mut conn = match tokio::time::timeout_at(deadline, builder.handshake::<_, Bytes>(io)).await
    {
        Ok(Ok(c)) => c,
        _ => return,
    };
    let Some(mut ping) = conn.ping_pong() else {
        return;
    };
    let live = Arc::new(AtomicUsize::new(0));
    let mut stop = shared.shutdown.subscribe();
    let tick = l
        .keepalive
        .min(l.idle_timeout.unwrap_or(l.keepalive))
        .div_f64(4.0)
        .max(MIN_TICK);
    let mut ticker = tokio::time::interval(tick);
    let (mut next_ping, mut ping_sent) = (Instant::now() + l.keepalive, None::<Instant>);
    let mut idle_since = Some(Instant::now());
    let mut closing = false;
    let mut closing_since = Instant::now();
    loop {
        tokio::select! {
            r = conn.accept() => match r {
                Some(Ok((req, respond))) => {
                    live.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(serve_stream(shared.clone(), peer.clone(), live.clone(), req, respond));
                }
                _ => break,
            },
            _ = ticker.tick() => {
                let now = Instant::now();
                match ping_sent {
                    // the peer stopped answering (or reading): close, as grpc's keepalive does
                    Some(sent) if now - sent > l.keepalive => break,
                    // a guard that sends would hide the send; clippy's collapsible_match wants one
                    #[allow(clippy::collapsible_match)]
                    None if now >= next_ping => {
                        if ping.send_ping(Ping::opaque()).is_ok() {
                            ping_sent = Some(now);
                        }
                    }
                    _ => {}
                }
                if closing && live.load(Ordering::Relaxed) == 0 && now - closing_since > GOAWAY_GRACE {
                    break;
                }
                if live.load(Ordering::Relaxed) > 0 {
                    idle_since = None;
                } else if let Some(idle) = l.idle_timeout {
                    let since = *idle_since.get_or_insert(now);
                    if now - since >= idle && !closing {
                        conn.graceful_shutdown();
                        (closing, closing_since) = (true, now);
                    }
                }
            },
            pong = std::future::poll_fn(|cx| ping.poll_pong(cx)), if ping_sent.is_some() => {
                if pong.is_err() {
                    break;
                }
                ping_sent = None;
                next_ping = Instant::now() + l.keepalive;
            },
            _ = stop.wait_for(|v| *v), if !closing => {
                conn.graceful_shutdown();
                (closing, closing_since) = (true, Instant::now());
            },
        }
    }
}
