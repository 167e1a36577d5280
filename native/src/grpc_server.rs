//! A gRPC server transport: HTTP/2 (h2) on a one-thread tokio runtime, calls handed to Python in batches.
//!
//! Theory of operation. [`GrpcServer::new`] binds the port with the configured listen backlog (so
//! a taken port fails at once) and starts a thread running a current-thread tokio runtime: one task
//! accepts connections, one task per connection drives HTTP/2 ([`crate::grpc_conn`]: keepalive
//! pings, idle GOAWAY), one task per stream reads the request, splits it into gRPC messages and
//! writes what Python answers ([`crate::grpc_stream`]). Nothing on that thread touches Python.
//! Events for Python (a new call with its whole request, a message of a client stream, its
//! half-close, a cancel, "this streamed message was taken by the client's window") go into one
//! queue; the first event of a batch wakes the signal task, which runs after the tasks already
//! ready (the other streams of the same read, mostly), so their events join the batch, and writes
//! one byte to a socket pair whose read end the asyncio loop watches; [`GrpcServer::drain`] hands
//! over everything queued as a list. Python answers
//! through [`GrpcServer::respond`], a batch of (call, message, status) operations: the batch goes
//! into one outbox and wakes the thread once (each wake from outside the runtime is a syscall, so
//! not one per call); the router task there hands each operation to its stream's task.
//!
//! Bounds: connections (past the limit a socket is closed before its handshake, as grpc does),
//! streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS), calls in all (past it
//! RESOURCE_EXHAUSTED at once), message size (refused from the 5-byte prefix), bytes queued for
//! Python (stream tasks wait, which stops reading and so closes the client's HTTP/2 window), bytes
//! of partial requests across all streams (past it RESOURCE_EXHAUSTED), the header list size.
//! Messages of server-streaming calls are written only as the client's window takes them, and
//! Python learns when each was (it waits before writing more); unary answers are one message.
//!
//! TLS: given a certificate and key (PEM), every connection is TLS (rustls, [`crate::grpc_tls`]);
//! its handshake runs in the connection's task within the HTTP/2 handshake's timeout, so a slow or
//! bad one holds a connection slot for at most that long and ends only that connection.
//! [`GrpcServer::set_tls`] replaces the certificate for the connections accepted after it.

use crate::grpc_conn::{serve_connection, MIN_TICK};
use crate::grpc_frame;
use crate::grpc_stream::is_metadata;
use crate::grpc_tls::{self, Tls};
use bytes::Bytes;
use http::HeaderMap;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::ToSocketAddrs;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;

/// A failed accept (out of descriptors) waits this long before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// Bytes read from the wake-up socket at once (one byte is written per batch of events).
const WAKE_READ_BYTES: usize = 256;

pub const EV_CALL: u8 = 0;
pub const EV_MESSAGE: u8 = 1;
pub const EV_HALF_CLOSE: u8 = 2;
pub const EV_CANCEL: u8 = 3;
pub const EV_WRITTEN: u8 = 4;

pub(crate) enum Event {
    Call {
        id: u64,
        method: String,
        /// the request's headers; the gRPC ones are left out when Python gets them
        metadata: HeaderMap,
        peer: Arc<str>,
        timeout_s: Option<f64>,
        body: Option<Bytes>,
    },
    Message(u64, Bytes),
    HalfClose(u64),
    Cancel(u64, u32, String),
    /// a message sent with `ack` was taken by the client's window: the call and its length
    Written(u64, usize),
}

pub(crate) enum Cmd {
    /// a framed message; `ack`: tell Python once the client's window has taken it
    Send(Bytes, bool),
    /// the call's last message (framed), if any, then its status and status message
    Finish(Option<Bytes>, u32, String),
}

struct Queue {
    events: Vec<Event>,
    /// the wake-up byte is written and Python has not drained since
    signalled: bool,
    /// the signal task has been woken to write it
    signal_due: bool,
}

/// Python's answers not yet handed to their streams, and whether the router has been woken for them.
struct Outbox {
    ops: Vec<(u64, Cmd)>,
    woken: bool,
}

pub(crate) struct Limits {
    pub(crate) max_connections: usize,
    pub(crate) max_streams: u32,
    pub(crate) max_calls: usize,
    pub(crate) max_message_bytes: usize,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) keepalive: Duration,
    pub(crate) max_queued_bytes: usize,
    pub(crate) max_partial_bytes: usize,
}

pub(crate) struct Shared {
    queue: Mutex<Queue>,
    wake_tx: UnixStream,
    queued_bytes: AtomicUsize,
    pub(crate) partial_bytes: AtomicUsize,
    room: Notify,
    signal: Notify,
    outbox: Mutex<Outbox>,
    outbox_ready: Notify,
    pub(crate) streams: Mutex<HashMap<u64, mpsc::UnboundedSender<Cmd>>>,
    pub(crate) next_id: AtomicU64,
    pub(crate) connections: AtomicUsize,
    pub(crate) calls: AtomicUsize,
    pub(crate) limits: Limits,
    pub(crate) client_streaming: HashSet<String>,
    pub(crate) shutdown: watch::Sender<bool>,
    /// the TLS configuration of new connections; `None`: plain HTTP/2
    pub(crate) tls: Option<Tls>,
}

impl Shared {
    pub(crate) fn push(&self, ev: Event, bytes: usize) {
        let mut q = self.queue.lock().unwrap();
        q.events.push(ev);
        self.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        if !q.signalled && !q.signal_due {
            q.signal_due = true;
            self.signal.notify_one(); // on the runtime's thread: no syscall
        }
    }

    /// Waits while Python has more than its share of bytes queued (the caller stops reading).
    pub(crate) async fn wait_room(&self) {
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
pub(crate) struct Held<'a>(pub(crate) &'a AtomicUsize, pub(crate) usize);

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
                        max_message_bytes, idle_timeout_s, keepalive_s, max_queued_bytes, max_partial_bytes,
                        backlog=1024, tls_cert=None, tls_key=None, tls_trust=None, client_auth="none"))]
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
        backlog: u32,
        tls_cert: Option<&[u8]>,
        tls_key: Option<&[u8]>,
        tls_trust: Option<&[u8]>,
        client_auth: &str,
    ) -> PyResult<GrpcServer> {
        // written negated so that NaN is refused too
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(keepalive_s > 0.0) || !(idle_timeout_s >= 0.0) || max_streams == 0 || backlog == 0 {
            return Err(PyValueError::new_err(format!(
                "keepalive_s {keepalive_s} must be positive, idle_timeout_s {idle_timeout_s} not negative, \
                 max_streams {max_streams} and backlog {backlog} positive"
            )));
        }
        let tls = match (tls_cert, tls_key) {
            (Some(cert), Some(key)) => {
                Some(Tls::new(tls_config(cert, key, tls_trust, client_auth)?))
            }
            (None, None) => None,
            _ => {
                return Err(PyValueError::new_err(
                    "TLS needs both tls_cert and tls_key (or neither)",
                ))
            }
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let listener = {
            let _in_runtime = rt.enter(); // the listener registers with this runtime's reactor
            listen(host, port, backlog)
                .map_err(|e| PyOSError::new_err(format!("gRPC port {host}:{port}: {e}")))?
        };
        let port = listener.local_addr()?.port();
        let (wake_rx, wake_tx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let (shutdown, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                events: Vec::new(),
                signalled: false,
                signal_due: false,
            }),
            wake_tx,
            queued_bytes: AtomicUsize::new(0),
            partial_bytes: AtomicUsize::new(0),
            room: Notify::new(),
            signal: Notify::new(),
            outbox: Mutex::new(Outbox {
                ops: Vec::new(),
                woken: false,
            }),
            outbox_ready: Notify::new(),
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
            tls,
        });
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

    /// Whether the port serves TLS.
    #[getter]
    fn tls(&self) -> bool {
        self.shared.tls.is_some()
    }

    /// A new certificate (and trust, client-auth policy) for the connections accepted from now on;
    /// those open keep theirs. A ValueError (and the old one stays) when the PEM does not load.
    #[pyo3(signature = (cert, key, trust=None, client_auth="none"))]
    fn set_tls(
        &self,
        cert: &[u8],
        key: &[u8],
        trust: Option<&[u8]>,
        client_auth: &str,
    ) -> PyResult<()> {
        let Some(tls) = self.shared.tls.as_ref() else {
            return Err(PyValueError::new_err(
                "this gRPC server was started without TLS",
            ));
        };
        tls.replace(tls_config(cert, key, trust, client_auth)?);
        Ok(())
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
            // one byte per batch, so one read empties the socket; more only after a lost race
            let mut sink = [0u8; WAKE_READ_BYTES];
            while matches!((&self.wake_rx).read(&mut sink), Ok(n) if n == WAKE_READ_BYTES) {}
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
                    let md = Bound::new(py, CallMetadata { headers: metadata })?;
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
                Event::Written(id, n) => (EV_WRITTEN, id, n).into_pyobject(py)?.into_any(),
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
        let mut cmds = Vec::with_capacity(ops.len());
        for op in ops.iter() {
            let (id, body, status, message, ack): (u64, Option<&[u8]>, i64, String, bool) =
                op.extract()?;
            let frame = body.map(grpc_frame::encode);
            if status >= 0 {
                cmds.push((id, Cmd::Finish(frame, status as u32, message)));
            } else if let Some(frame) = frame {
                cmds.push((id, Cmd::Send(frame, ack)));
            }
        }
        if cmds.is_empty() {
            return Ok(());
        }
        let mut outbox = self.shared.outbox.lock().unwrap();
        outbox.ops.append(&mut cmds);
        if !outbox.woken {
            outbox.woken = true;
            self.shared.outbox_ready.notify_one();
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

fn tls_config(
    cert: &[u8],
    key: &[u8],
    trust: Option<&[u8]>,
    client_auth: &str,
) -> PyResult<Arc<rustls::ServerConfig>> {
    grpc_tls::server_config(cert, key, trust, client_auth)
        .map_err(|e| PyValueError::new_err(format!("gRPC TLS {e}")))
}

fn run(
    rt: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    listener: tokio::net::TcpListener,
    grace: Arc<Mutex<Duration>>,
) {
    rt.block_on(async {
        let mut stop = shared.shutdown.subscribe();
        tokio::spawn(route(shared.clone()));
        tokio::spawn(signal_python(shared.clone()));
        tokio::select! {
            _ = accept_loop(&shared, listener) => {}
            _ = stop.wait_for(|v| *v) => {}
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

/// Writes the wake-up byte for the events queued; woken by the first of a batch, it runs after the
/// tasks that were ready then, so one byte (one wake-up of the event loop) covers all their events.
async fn signal_python(shared: Arc<Shared>) {
    loop {
        shared.signal.notified().await;
        let mut q = shared.queue.lock().unwrap();
        q.signal_due = false;
        if !q.signalled && !q.events.is_empty() {
            q.signalled = true;
            // a full socket already holds a wake-up byte, so a failed write loses nothing
            let _ = (&shared.wake_tx).write(&[1]);
        }
    }
}

/// Hands Python's answers from the outbox to their streams' tasks (on the runtime's thread, so
/// waking those tasks costs no syscall).
async fn route(shared: Arc<Shared>) {
    loop {
        shared.outbox_ready.notified().await;
        let ops = {
            let mut outbox = shared.outbox.lock().unwrap();
            outbox.woken = false;
            std::mem::take(&mut outbox.ops)
        };
        let streams = shared.streams.lock().unwrap();
        for (id, cmd) in ops {
            if let Some(tx) = streams.get(&id) {
                let _ = tx.send(cmd);
            }
        }
    }
}

/// A listening socket on the first address of `host` that binds, with `backlog` (Rust's own
/// `TcpListener::bind` takes no backlog). Needs to run inside the runtime (it registers there).
fn listen(host: &str, port: u16, backlog: u32) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?; // as std's bind: a port in TIME_WAIT can be taken again
        match socket.bind(addr).and_then(|()| socket.listen(backlog)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to bind")
    }))
}

/// A call's metadata, handed to Python as is: most handlers never look at it, so its strings are
/// made only when asked for.
#[pyclass(frozen, module = "rocketq._native")]
pub struct CallMetadata {
    headers: HeaderMap,
}

#[pymethods]
impl CallMetadata {
    /// `((key, value), ...)` of the non-gRPC headers; values that are not UTF-8 decoded lossily.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let items = self
            .headers
            .iter()
            .filter(|(k, _)| is_metadata(k.as_str()))
            .map(|(k, v)| {
                let value = String::from_utf8_lossy(v.as_bytes());
                (PyString::new(py, k.as_str()), PyString::new(py, &value))
            })
            .collect::<Vec<_>>();
        PyTuple::new(py, items)
    }
}
