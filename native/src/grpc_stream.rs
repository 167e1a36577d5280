//! One gRPC call on one HTTP/2 stream: its request in, Python's answers out.
//!
//! Theory of operation. [`serve_stream`] runs as a task per stream on the transport's thread. It
//! reads the request and splits it into gRPC messages ([`crate::grpc_frame::Decoder`]); a unary
//! request becomes one CALL event once it is whole, a client stream a CALL event at once and a
//! MESSAGE event per message. Python's answers reach the task over its command channel (fed by
//! the server's router, [`crate::grpc_server`]): messages are written as far as the client's
//! window takes them (and, when Python asked, a WRITTEN event tells it each one was taken), and
//! FINISH writes what is left, then the trailers. The task also ends the call on its deadline, on
//! a client reset and on bad framing, telling Python with a CANCEL event when its handler runs.

use crate::grpc_frame::{self, code, Decoder, PREFIX_BYTES};
use crate::grpc_server::{Cmd, Event, Held, Shared};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, Response};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;

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

/// The request headers Python sees as metadata (gRPC's own are the transport's business).
pub(crate) fn is_metadata(name: &str) -> bool {
    !matches!(
        name,
        "content-type" | "te" | "grpc-timeout" | "grpc-encoding" | "grpc-accept-encoding"
    )
}

pub(crate) async fn serve_stream(
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
    // the header map itself goes to Python's side (drain converts it there): no copy per header here
    let mut call = Some(Event::Call {
        id,
        method,
        metadata: parts.headers,
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
    let mut writing: Option<Writing> = None;
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
                Some(Cmd::Finish(last, c, why)) => {
                    // the handler is done: what is queued goes out without waiting for the window
                    // (h2 holds it, one stream's worth), then its last message and the trailers
                    out.extend(last.map(|frame| Cmd::Send(frame, false)));
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

/// A message being written: what the window has not taken yet, and, when Python asked to hear
/// of it, the message's length (the WRITTEN event's).
type Writing = (Bytes, Option<usize>);

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
    writing: &mut Option<Writing>,
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
            if let Some(n) = *ack {
                shared.push(Event::Written(id, n), 0);
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
                let len = frame.len() - PREFIX_BYTES;
                *writing = Some((frame, ack.then_some(len)));
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
    writing: &mut Option<Writing>,
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
