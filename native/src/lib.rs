//! `rocketq._native`: the loops over bytes of rocketq's data path, one call per batch or run.
//! Policy stays in Python; `src/rocketq/_native.pyi` documents every function and class.

use pyo3::prelude::*;

pub mod batch;
pub mod buffers;
pub mod columns;
pub mod dispatch;
pub mod filterprops;
pub mod frame;
pub mod grpc_conn;
pub mod grpc_frame;
pub mod grpc_server;
pub mod grpc_stream;
pub mod grpc_tls;
pub mod index;
pub mod javahash;
pub mod json_header;
pub mod message;
pub mod msgid;
pub mod props;
pub mod pulled;
pub mod put_result;
pub mod reads;
pub mod record;
pub mod scan;
pub mod send;
pub mod single;
pub mod sink;
pub mod slots;
pub mod wire;

/// `String.hashCode` of `text`, as Java's signed int.
#[pyfunction]
fn java_hash(text: &str) -> i32 {
    javahash::java_hash_parts(&[text.as_bytes()])
}

/// The index key hash of `text`: `abs(hashCode)`, `Integer.MIN_VALUE` mapped to 0.
#[pyfunction]
fn index_hash(text: &str) -> i32 {
    javahash::index_hash_parts(&[text.as_bytes()])
}

/// CRC-32 (IEEE) of `data`, masked to 31 bits as RocketMQ stores body CRCs.
#[pyfunction]
fn body_crc(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u32> {
    let buf = buffers::Bytes::readable(data)?;
    let raw = buf.raw();
    // SAFETY: the export is held for the call.
    let run = || record::body_crc(unsafe { raw.slice() });
    Ok(if buf.len() >= batch::DETACH_FROM_BYTES {
        py.detach(run)
    } else {
        run()
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add(
        "BUILD_PROFILE",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
    )?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(java_hash, m)?)?;
    m.add_function(wrap_pyfunction!(index_hash, m)?)?;
    m.add_function(wrap_pyfunction!(body_crc, m)?)?;
    m.add_function(wrap_pyfunction!(dispatch::dispatch_scan, m)?)?;
    m.add_function(wrap_pyfunction!(dispatch::cq_write, m)?)?;
    m.add_function(wrap_pyfunction!(index::index_put_run, m)?)?;
    m.add_function(wrap_pyfunction!(index::index_put, m)?)?;
    m.add_function(wrap_pyfunction!(scan::scan_segment, m)?)?;
    m.add_function(wrap_pyfunction!(scan::find_record_start, m)?)?;
    m.add_function(wrap_pyfunction!(reads::read_units, m)?)?;
    m.add_function(wrap_pyfunction!(pulled::pulled_messages, m)?)?;
    m.add_function(wrap_pyfunction!(columns::record_columns, m)?)?;
    m.add_function(wrap_pyfunction!(columns::walk::walk_columns, m)?)?;
    m.add_function(wrap_pyfunction!(columns::walk::walk_bodies_columns, m)?)?;
    m.add_function(wrap_pyfunction!(filterprops::property_codes, m)?)?;
    m.add_function(wrap_pyfunction!(message::encode_send_batch, m)?)?;
    m.add_function(wrap_pyfunction!(sink::encode_sink_rows, m)?)?;
    m.add_function(wrap_pyfunction!(frame::decode_frames, m)?)?;
    m.add_function(wrap_pyfunction!(frame::encode_frame_header, m)?)?;
    m.add_function(wrap_pyfunction!(send::send_fields, m)?)?;
    m.add_function(wrap_pyfunction!(send::stage_send, m)?)?;
    m.add_class::<batch::RecordBatch>()?;
    m.add_class::<single::SinglePut>()?;
    m.add_class::<columns::ColumnBuffer>()?;
    m.add_class::<dispatch::DispatchRun>()?;
    m.add_class::<pulled::RecordView>()?;
    m.add_class::<grpc_server::GrpcServer>()?;
    m.add_class::<grpc_server::CallMetadata>()?;
    m.add("BatchError", py.get_type::<batch::BatchError>())?;
    m.add("BatchFormatError", py.get_type::<batch::BatchFormatError>())?;
    m.add("SegmentFull", py.get_type::<single::SegmentFull>())?;
    Ok(())
}
