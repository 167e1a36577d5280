//! A gRPC server transport: HTTP/2 (h2) on a one-thread tokio runtime, calls handed to Python in batches.
//!
//! Theory of operation. [`GrpcServer::new`] binds the port (so a taken port fails at once) and starts
//! a thread running a current-thread tokio runtime: one task accepts connections, one task per
//! connection drives HTTP/2 (keepalive pings, idle GOAWAY), one task per stream reads the request,
//! splits it into gRPC messages ([`crate::grpc_frame::Decoder`]) and writes what Python answers.
//! Nothing on that thread touches Python. Events for Python (a new call with its whole request, a
//! message of a client stream, its half-close, a cancel, "this streamed message was taken by the
//! client's window") go into one queue; the first event of a batch writes one byte to a socket
//! pair whose read end the asyncio loop watches, and [`GrpcServer::drain`] hands over everything
//! queued as a list. Python answers through [`GrpcServer::respond`], a batch of (call, message,
//! status) operations, each forwarded to its stream task over an in-memory channel.
//!
//! Bounds: connections (past the limit a socket is closed before its handshake, as grpc does),
//! streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS), calls in all (past it
//! RESOURCE_EXHAUSTED at once), message size (refused from the 5-byte prefix), bytes queued for
//! Python (stream tasks wait, which stops reading and so closes the client's HTTP/2 window), bytes
//! of partial requests across all streams (past it RESOURCE_EXHAUSTED), the header list size.
//! Messages of server-streaming calls are written only as the client's window takes them, and
//! Python learns when each was (it waits before writing more); unary answers are one message.

use crate::grpc_frame::{self, code, Decoder};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Ping, RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, Response};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;

/// HTTP/2 flow-control windows the server grants (the spec's default is 64 KiB).
const STREAM_WINDOW_BYTES: u32 = 1 << 20;
const CONNECTION_WINDOW_BYTES: u32 = 8 << 20;
const MAX_FRAME_BYTES: u32 = 1 << 16;
/// grpc's default hard limit of metadata per call.
const MAX_HEADER_LIST_BYTES: u32 = 16 << 10;
/// What h2 may hold for one stream beyond what the peer's window has taken.
const SEND_BUFFER_BYTES: usize = 1 << 20;
/// A connection that has not finished its HTTP/2 preface by then is closed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A failed accept (out of descriptors) waits this long before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// Fastest check of a connection's keepalive and idle timers.
const MIN_TICK: Duration = Duration::from_millis(50);
/// After GOAWAY, a connection with no stream left is closed this soon even if the peer never
/// answers the shutdown's ping (grpc closes idle connections outright).
const GOAWAY_GRACE: Duration = Duration::from_secs(1);
/// Streams reset by clients faster than served (rapid reset) before the connection is closed.
const MAX_PENDING_ACCEPT_RESETS: usize = 200;

pub const EV_CALL: u8 = 0;
pub const EV_MESSAGE: u8 = 1;
pub const EV_HALF_CLOSE: u8 = 2;
pub const EV_CANCEL: u8 = 3;
pub const EV_WRITTEN: u8 = 4;

enum Event {
    Call {
        id: u64,
        method: String,
        metadata: Vec<(String, String)>,
        peer: Arc<str>,
        timeout_s: Option<f64>,
        body: Option<Bytes>,
    },
    Message(u64, Bytes),
    HalfClose(u64),
    Cancel(u64, u32, String),
    Written(u64),
}

enum Cmd {
    /// a framed message; `ack`: tell Python once the client's window has taken it
    Send(Bytes, bool),
    Finish(u32, String),
}

struct Queue {
    events: Vec<Event>,
    signalled: bool,
}

struct Limits {
    max_connections: usize,
    max_streams: u32,
    max_calls: usize,
    max_message_bytes: usize,
    idle_timeout: Option<Duration>,
    keepalive: Duration,
    max_queued_bytes: usize,
    max_partial_bytes: usize,
}

struct Shared {
    queue: Mutex<Queue>,
    wake_tx: UnixStream,
    queued_bytes: AtomicUsize,
    partial_bytes: AtomicUsize,
    room: Notify,
    streams: Mutex<HashMap<u64, mpsc::UnboundedSender<Cmd>>>,
    next_id: AtomicU64,
    connections: AtomicUsize,
    calls: AtomicUsize,
    limits: Limits,
    client_streaming: HashSet<String>,
    shutdown: watch::Sender<bool>,
}

impl Shared {
    fn push(&self, ev: Event, bytes: usize) {
        let mut q = self.queue.lock().unwrap();
        q.events.push(ev);
        self.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        if !q.signalled {
            q.signalled = true;
            // a full socket already holds a wake-up byte, so a failed write loses nothing
            let _ = (&self.wake_tx).write(&[1]);
        }
    }

    /// Waits while Python has more than its share of bytes queued (the caller stops reading).
    async fn wait_room(&self) {
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.queued_bytes.load(Ordering::Relaxed) <= self.limits.max_queued_bytes {
                return;
            }
            notified.await;
        }
    }
}

/// Decrements a counter when dropped.
struct Held<'a>(&'a AtomicUsize, usize);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::Relaxed);
    }
}

/// The native gRPC server; see the module doc and `rocketq/_native.pyi`.
#[pyclass(frozen, module = "rocketq._native")]
pub struct GrpcServer {
    shared: Arc<Shared>,
    wake_rx: UnixStream,
    #[pyo3(get)]
    port: u16,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    grace: Arc<Mutex<Duration>>,
}

#[pymethods]
impl GrpcServer {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (host, port, client_streaming, *, max_connections, max_streams, max_calls,
                        max_message_bytes, idle_timeout_s, keepalive_s, max_queued_bytes, max_partial_bytes))]
    fn new(
        host: &str,
        port: u16,
        client_streaming: Vec<String>,
        max_connections: usize,
        max_streams: u32,
        max_calls: usize,
        max_message_bytes: usize,
        idle_timeout_s: f64,
        keepalive_s: f64,
        max_queued_bytes: usize,
        max_partial_bytes: usize,
    ) -> PyResult<GrpcServer> {
        if !(keepalive_s > 0.0) || !(idle_timeout_s >= 0.0) || max_streams == 0 {
            return Err(PyValueError::new_err(format!(
                "keepalive_s {keepalive_s} must be positive, idle_timeout_s {idle_timeout_s} not negative, \
                 max_streams {max_streams} positive"
            )));
        }
        let listener = std::net::TcpListener::bind((host, port))
            .map_err(|e| PyOSError::new_err(format!("gRPC port {host}:{port}: {e}")))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let (wake_rx, wake_tx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let (shutdown, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                events: Vec::new(),
                signalled: false,
            }),
            wake_tx,
            queued_bytes: AtomicUsize::new(0),
            partial_bytes: AtomicUsize::new(0),
            room: Notify::new(),
            streams: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            connections: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            limits: Limits {
                max_connections,
                max_streams,
                max_calls,
                max_message_bytes,
                idle_timeout: (idle_timeout_s > 0.0)
                    .then(|| Duration::from_secs_f64(idle_timeout_s)),
                keepalive: Duration::from_secs_f64(keepalive_s),
                max_queued_bytes,
                max_partial_bytes,
            },
            client_streaming: client_streaming.into_iter().collect(),
            shutdown,
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let grace = Arc::new(Mutex::new(Duration::ZERO));
        let (s, g) = (shared.clone(), grace.clone());
        let thread = std::thread::Builder::new()
            .name("rocketq-grpc".into())
            .spawn(move || run(rt, s, listener, g))?;
        Ok(GrpcServer {
            shared,
            wake_rx,
            port,
            thread: Mutex::new(Some(thread)),
            grace,
        })
    }

    /// The descriptor the event loop watches: readable when events are queued.
    #[getter]
    fn wake_fd(&self) -> i32 {
        self.wake_rx.as_raw_fd()
    }

    /// Everything queued for Python, oldest first, as tuples (see `_native.pyi`).
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let events = {
            let mut q = self.shared.queue.lock().unwrap();
            let mut sink = [0u8; 256];
            while matches!((&self.wake_rx).read(&mut sink), Ok(n) if n > 0) {}
            q.signalled = false;
            std::mem::take(&mut q.events)
        };
        let list = PyList::empty(py);
        let mut bytes = 0;
        for ev in events {
            let item = match ev {
                Event::Call {
                    id,
                    method,
                    metadata,
                    peer,
                    timeout_s,
                    body,
                } => {
                    bytes += body.as_ref().map_or(0, Bytes::len);
                    let md =
                        PyTuple::new(py, metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
                    let body = body.map(|b| PyBytes::new(py, &b));
                    (EV_CALL, id, method, md, &*peer, timeout_s, body)
                        .into_pyobject(py)?
                        .into_any()
                }
                Event::Message(id, body) => {
                    bytes += body.len();
                    (EV_MESSAGE, id, PyBytes::new(py, &body))
                        .into_pyobject(py)?
                        .into_any()
                }
                Event::HalfClose(id) => (EV_HALF_CLOSE, id).into_pyobject(py)?.into_any(),
                Event::Cancel(id, c, why) => (EV_CANCEL, id, c, why).into_pyobject(py)?.into_any(),
                Event::Written(id) => (EV_WRITTEN, id).into_pyobject(py)?.into_any(),
            };
            list.append(item)?;
        }
        if bytes > 0 {
            self.shared.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.shared.room.notify_waiters();
        }
        Ok(list)
    }

    /// A batch of `(call id, message bytes or None, status code or -1, status message, ack)`:
    /// the message is sent first (with `ack`, a WRITTEN event follows once the client's window
    /// has taken it), then, when the code is not -1, the trailers end the call. Operations on a
    /// call that has ended are dropped.
    fn respond(&self, ops: &Bound<'_, PyList>) -> PyResult<()> {
        let streams = self.shared.streams.lock().unwrap();
        for op in ops.iter() {
            let (id, body, status, message, ack): (u64, Option<&[u8]>, i64, String, bool) =
                op.extract()?;
            let Some(tx) = streams.get(&id) else { continue };
            if let Some(body) = body {
                let _ = tx.send(Cmd::Send(grpc_frame::encode(body), ack));
            }
            if status >= 0 {
                let _ = tx.send(Cmd::Finish(status as u32, message));
            }
        }
        Ok(())
    }

    /// (open connections, calls in progress, bytes queued for Python).
    fn stats(&self) -> (usize, usize, usize) {
        let s = &self.shared;
        (
            s.connections.load(Ordering::Relaxed),
            s.calls.load(Ordering::Relaxed),
            s.queued_bytes.load(Ordering::Relaxed),
        )
    }

    /// Stops accepting, sends GOAWAY to every connection, lets calls finish for `grace_s`, then
    /// closes everything. Safe to call twice.
    fn close(&self, py: Python<'_>, grace_s: f64) {
        *self.grace.lock().unwrap() = Duration::from_secs_f64(grace_s.max(0.0));
        // send_replace: stored even before the server thread has subscribed (send would drop it then)
        self.shared.shutdown.send_replace(true);
        let handle = self.thread.lock().unwrap().take();
        if let Some(h) = handle {
            py.detach(move || {
                let _ = h.join();
            });
        }
        self.shared.streams.lock().unwrap().clear();
    }
}

fn run(
    rt: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    grace: Arc<Mutex<Duration>>,
) {
    rt.block_on(async {
        let mut stop = shared.shutdown.subscribe();
        if let Ok(listener) = tokio::net::TcpListener::from_std(listener) {
            tokio::select! {
                _ = accept_loop(&shared, listener) => {}
                _ = stop.wait_for(|v| *v) => {}
            }
        }
        let _ = stop.wait_for(|v| *v).await;
        // connections got GOAWAY from their own watchers; give the calls in progress the grace time
        let until = Instant::now() + *grace.lock().unwrap();
        while shared.connections.load(Ordering::Relaxed) > 0 && Instant::now() < until {
            tokio::time::sleep(MIN_TICK).await;
        }
    });
    drop(rt); // cancels what is left: their sockets close
}

async fn accept_loop(shared: &Arc<Shared>, listener: tokio::net::TcpListener) {
    loop {
        match listener.accept().await {
            Ok((sock, peer)) => {
                if shared.connections.load(Ordering::Relaxed) >= shared.limits.max_connections {
                    drop(sock); // as grpc: closed before the handshake
                    continue;
                }
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let _ = sock.set_nodelay(true);
                tokio::spawn(serve_connection(shared.clone(), sock, peer));
            }
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

async fn serve_connection(shared: Arc<Shared>, sock: tokio::net::TcpStream, peer: SocketAddr) {
    let _held = Held(&shared.connections, 1);
    let peer: Arc<str> = match peer {
        SocketAddr::V4(a) => format!("ipv4:{a}"),
        SocketAddr::V6(a) => format!("ipv6:{a}"),
    }
    .into();
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
    // a connection that never completes its preface is idle too: the idle timeout holds for it as well
    let handshake = l
        .idle_timeout
        .map_or(HANDSHAKE_TIMEOUT, |idle| idle.min(HANDSHAKE_TIMEOUT));
    let mut conn = match tokio::time::timeout(handshake, builder.handshake::<_, Bytes>(sock)).await
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

fn grpc_headers(status: Option<(u32, &str)>) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Some((c, message)) = status {
        h.insert("grpc-status", HeaderValue::from(c));
        if !message.is_empty() {
            if let Ok(v) = HeaderValue::from_str(&grpc_frame::percent_encode(message)) {
                h.insert("grpc-message", v);
            }
        }
    }
    h
}

fn response(status: Option<(u32, &str)>) -> Response<()> {
    let mut r = Response::new(());
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/grpc"));
    h.insert("grpc-accept-encoding", HeaderValue::from_static("identity"));
    h.extend(grpc_headers(status));
    r
}

/// Ends a stream with `code`: trailers after what was sent, or a trailers-only response.
fn end(
    respond: &mut Option<SendResponse<Bytes>>,
    send: &mut Option<SendStream<Bytes>>,
    c: u32,
    why: &str,
) {
    if let Some(s) = send.as_mut() {
        let _ = s.send_trailers(grpc_headers(Some((c, why))));
    } else if let Some(r) = respond.as_mut() {
        let _ = r.send_response(response(Some((c, why))), true);
    }
    *send = None;
    *respond = None;
}

async fn next_data(body: &mut Option<RecvStream>) -> Option<Result<Bytes, h2::Error>> {
    match body {
        Some(b) => b.data().await,
        None => std::future::pending().await,
    }
}

async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

enum Out {
    Capacity(bool),
    Reset,
}

/// The stream's write side: capacity for the message being written, or a reset by the client.
fn poll_out(
    cx: &mut std::task::Context<'_>,
    respond: &mut Option<SendResponse<Bytes>>,
    send: &mut Option<SendStream<Bytes>>,
    writing: bool,
) -> std::task::Poll<Out> {
    use std::task::Poll;
    if let Some(s) = send.as_mut() {
        if writing {
            if let Poll::Ready(c) = s.poll_capacity(cx) {
                return Poll::Ready(Out::Capacity(matches!(c, Some(Ok(_)))));
            }
        }
        if s.poll_reset(cx).is_ready() {
            return Poll::Ready(Out::Reset);
        }
    } else if let Some(r) = respond.as_mut() {
        if r.poll_reset(cx).is_ready() {
            return Poll::Ready(Out::Reset);
        }
    }
    Poll::Pending
}

fn metadata_of(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "content-type" | "te" | "grpc-timeout" | "grpc-encoding" | "grpc-accept-encoding"
            )
        })
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

async fn serve_stream(
    shared: Arc<Shared>,
    peer: Arc<str>,
    live: Arc<AtomicUsize>,
    req: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
) {
    let _live = Held(&live, 1);
    let mut respond = Some(respond);
    let mut send: Option<SendStream<Bytes>> = None;
    let (parts, body) = req.into_parts();
    let grpc = parts
        .headers
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if parts.method != http::Method::POST || !grpc {
        let mut r = Response::new(());
        *r.status_mut() = http::StatusCode::UNSUPPORTED_MEDIA_TYPE;
        if let Some(mut resp) = respond {
            let _ = resp.send_response(r, true);
        }
        return;
    }
    if shared.calls.fetch_add(1, Ordering::Relaxed) >= shared.limits.max_calls {
        shared.calls.fetch_sub(1, Ordering::Relaxed);
        let why = format!(
            "the server has {} calls in progress, its limit",
            shared.limits.max_calls
        );
        end(&mut respond, &mut send, code::RESOURCE_EXHAUSTED, &why);
        return;
    }
    let _call = Held(&shared.calls, 1);
    let timeout = parts
        .headers
        .get("grpc-timeout")
        .and_then(|v| grpc_frame::parse_timeout(v.as_bytes()));
    let deadline = timeout.map(|t| Instant::now() + t);
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = mpsc::unbounded_channel();
    shared.streams.lock().unwrap().insert(id, tx);
    let _registered = Registered(&shared, id);
    let method = parts.uri.path().to_owned();
    let streaming = shared.client_streaming.contains(&method);
    let mut call = Some(Event::Call {
        id,
        method,
        metadata: metadata_of(&parts.headers),
        peer,
        timeout_s: timeout.map(|t| t.as_secs_f64()),
        body: None,
    });
    if streaming {
        shared.wait_room().await;
        shared.push(call.take().unwrap(), 0);
    }
    let mut body = Some(body);
    let mut decoder = Decoder::new(shared.limits.max_message_bytes);
    let mut partial = Held(&shared.partial_bytes, 0);
    let mut request: Option<Bytes> = None;
    let mut out: VecDeque<Cmd> = VecDeque::new();
    let mut writing: Option<(Bytes, bool)> = None;
    // what ends the stream: (status, reason, whether Python is told to stop its handler)
    let ended: (u32, String, bool) = 'serve: loop {
        tokio::select! {
            _ = until(deadline) => break (code::DEADLINE_EXCEEDED, "deadline exceeded".into(), call.is_none()),
            chunk = next_data(&mut body) => match chunk {
                Some(Ok(data)) => {
                    let n = data.len();
                    if let Some(b) = body.as_mut() {
                        let _ = b.flow_control().release_capacity(n);
                    }
                    decoder.push(&data);
                    loop {
                        match decoder.next_message() {
                            Ok(Some(msg)) if streaming => {
                                shared.wait_room().await;
                                let len = msg.len();
                                shared.push(Event::Message(id, msg), len);
                            }
                            Ok(Some(msg)) => {
                                if request.replace(msg).is_some() {
                                    break 'serve (code::INTERNAL, "a unary method's request has more than one \
                                        message".into(), false);
                                }
                            }
                            Ok(None) => break,
                            Err(e) => break 'serve (e.code, e.message, call.is_none()),
                        }
                    }
                    // bytes of messages not complete yet, counted against the server-wide bound
                    let held = decoder.buffered();
                    if held > partial.1 {
                        shared.partial_bytes.fetch_add(held - partial.1, Ordering::Relaxed);
                    } else {
                        shared.partial_bytes.fetch_sub(partial.1 - held, Ordering::Relaxed);
                    }
                    partial.1 = held;
                    if shared.partial_bytes.load(Ordering::Relaxed) > shared.limits.max_partial_bytes {
                        break 'serve (code::RESOURCE_EXHAUSTED, format!("the server holds more than {} bytes \
                            of requests in progress", shared.limits.max_partial_bytes), call.is_none());
                    }
                }
                Some(Err(_)) => break 'serve (code::CANCELLED, "the client reset the stream".into(), true),
                None => {
                    body = None;
                    if let Err(e) = decoder.finish() {
                        break 'serve (e.code, e.message, call.is_none());
                    }
                    if streaming {
                        shared.push(Event::HalfClose(id), 0);
                    } else if let Some(Event::Call { body: b, .. }) = call.as_mut() {
                        let Some(msg) = request.take() else {
                            break 'serve (code::INTERNAL, "a unary method's request has no message".into(),
                                          false);
                        };
                        let len = msg.len();
                        *b = Some(msg);
                        shared.wait_room().await;
                        shared.push(call.take().unwrap(), len);
                    }
                }
            },
            cmd = rx.recv() => match cmd {
                Some(Cmd::Finish(c, why)) => {
                    // the handler is done: what is queued goes out without waiting for the window
                    // (h2 holds it, one stream's worth), then the trailers
                    flush(&mut respond, &mut send, &mut out, &mut writing);
                    end(&mut respond, &mut send, c, &why);
                    return;
                }
                Some(c) => out.push_back(c),
                None => break (code::UNAVAILABLE, "the server is shutting down".into(), true),
            },
            o = std::future::poll_fn(|cx| poll_out(cx, &mut respond, &mut send, writing.is_some())) => match o {
                Out::Reset | Out::Capacity(false) => break (code::CANCELLED, "the client reset the stream".into(), true),
                Out::Capacity(true) => {}
            },
        }
        if !pump(&shared, id, &mut respond, &mut send, &mut out, &mut writing) {
            break (
                code::CANCELLED,
                "the stream failed while writing".into(),
                true,
            );
        }
    };
    let (c, why, tell) = ended;
    end(&mut respond, &mut send, c, &why);
    if tell && call.is_none() {
        shared.push(Event::Cancel(id, c, why), 0);
    }
}

/// Unregisters a call's command channel when its stream task ends.
struct Registered<'a>(&'a Shared, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.streams.lock().unwrap().remove(&self.1);
    }
}

fn headers_sent<'a>(
    respond: &mut Option<SendResponse<Bytes>>,
    send: &'a mut Option<SendStream<Bytes>>,
) -> Option<&'a mut SendStream<Bytes>> {
    if send.is_none() {
        *send = respond.take()?.send_response(response(None), false).ok();
    }
    send.as_mut()
}

/// Writes queued messages as far as the client's window allows; false when the stream is gone.
fn pump(
    shared: &Shared,
    id: u64,
    respond: &mut Option<SendResponse<Bytes>>,
    send: &mut Option<SendStream<Bytes>>,
    out: &mut VecDeque<Cmd>,
    writing: &mut Option<(Bytes, bool)>,
) -> bool {
    loop {
        if let Some((buf, ack)) = writing.as_mut() {
            let Some(s) = send.as_mut() else { return false };
            let cap = s.capacity();
            if cap == 0 {
                s.reserve_capacity(buf.len());
                return true;
            }
            let chunk = buf.split_to(cap.min(buf.len()));
            if s.send_data(chunk, false).is_err() {
                return false;
            }
            if !buf.is_empty() {
                s.reserve_capacity(buf.len());
                continue;
            }
            if *ack {
                shared.push(Event::Written(id), 0);
            }
            *writing = None;
        }
        match out.pop_front() {
            None => return true,
            Some(Cmd::Send(frame, ack)) => {
                let Some(s) = headers_sent(respond, send) else {
                    return false;
                };
                s.reserve_capacity(frame.len());
                *writing = Some((frame, ack));
            }
            Some(Cmd::Finish(..)) => unreachable!("Finish is handled where it is received"),
        }
    }
}

/// Hands everything queued to h2 at once (h2 buffers what the window has not taken).
fn flush(
    respond: &mut Option<SendResponse<Bytes>>,
    send: &mut Option<SendStream<Bytes>>,
    out: &mut VecDeque<Cmd>,
    writing: &mut Option<(Bytes, bool)>,
) {
    let rest = writing.take().map(|(b, _)| b).into_iter();
    let queued = out.drain(..).filter_map(|c| match c {
        Cmd::Send(b, _) => Some(b),
        Cmd::Finish(..) => None,
    });
    for frame in rest.chain(queued) {
        match headers_sent(respond, send) {
            Some(s) => {
                if s.send_data(frame, false).is_err() {
                    return;
                }
            }
            None => return,
        }
    }
}
