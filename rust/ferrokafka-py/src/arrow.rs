//! Reading Arrow binary/string arrays handed over through the Arrow PyCapsule
//! interface (`__arrow_c_array__`), without pyarrow and without a Python
//! object per element: the values are slices of the producer's own buffers.
//!
//! Only the layouts a key or value column has are accepted: binary `z`,
//! large binary `Z`, utf8 `u`, large utf8 `U` (C Data Interface format
//! strings). Anything else is a `ValueError` naming the type.

use std::ffi::{c_char, c_void, CStr};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

#[repr(C)]
pub(crate) struct FfiSchema {
    pub(crate) format: *const c_char,
    pub(crate) name: *const c_char,
    pub(crate) metadata: *const c_char,
    pub(crate) flags: i64,
    pub(crate) n_children: i64,
    pub(crate) children: *mut *mut FfiSchema,
    pub(crate) dictionary: *mut FfiSchema,
    pub(crate) release: Option<unsafe extern "C" fn(*mut FfiSchema)>,
    pub(crate) private_data: *mut c_void,
}

#[repr(C)]
pub(crate) struct FfiArray {
    pub(crate) length: i64,
    pub(crate) null_count: i64,
    pub(crate) offset: i64,
    pub(crate) n_buffers: i64,
    pub(crate) n_children: i64,
    pub(crate) buffers: *mut *const c_void,
    pub(crate) children: *mut *mut FfiArray,
    pub(crate) dictionary: *mut FfiArray,
    pub(crate) release: Option<unsafe extern "C" fn(*mut FfiArray)>,
    pub(crate) private_data: *mut c_void,
}

/// A binary column borrowed from Arrow buffers. The capsules it came from are
/// held in `_keep` so the producer's memory outlives every slice we hand out
/// (they are released when this value is dropped, with the GIL).
pub struct BinaryColumn {
    _keep: (Py<PyCapsule>, Py<PyCapsule>),
    len: usize,
    offset: usize,
    large: bool,
    validity: *const u8,
    offsets: *const u8,
    data: *const u8,
}

// SAFETY: the pointers are into immutable Arrow buffers owned by the capsule
// (kept alive by `_keep`); Arrow arrays are immutable once exported, so reading
// them from another thread while the GIL is released is sound.
unsafe impl Send for BinaryColumn {}
unsafe impl Sync for BinaryColumn {}

impl crate::producer::ItemSizes for BinaryColumn {
    #[inline]
    fn size_of(&self, i: usize) -> i32 {
        self.get(i).map_or(-1, |b| b.len() as i32)
    }
}

impl BinaryColumn {
    pub fn from_pycapsule(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
        let pair = obj.call_method0("__arrow_c_array__")?;
        let pair = pair.cast::<PyTuple>().map_err(|_| {
            PyValueError::new_err(format!(
                "invalid value for {what}: __arrow_c_array__ did not return a tuple"
            ))
        })?;
        let schema_cap = pair.get_item(0)?.cast_into::<PyCapsule>().map_err(|_| {
            PyValueError::new_err(format!(
                "invalid value for {what}: not an Arrow schema capsule"
            ))
        })?;
        let array_cap = pair.get_item(1)?.cast_into::<PyCapsule>().map_err(|_| {
            PyValueError::new_err(format!(
                "invalid value for {what}: not an Arrow array capsule"
            ))
        })?;
        // SAFETY: capsule names are checked by `pointer_checked`; the structs
        // are the C Data Interface's, valid while the capsules live.
        let schema = unsafe {
            &*(schema_cap.pointer_checked(Some(c"arrow_schema"))?.as_ptr() as *const FfiSchema)
        };
        let array = unsafe {
            &*(array_cap.pointer_checked(Some(c"arrow_array"))?.as_ptr() as *const FfiArray)
        };
        if schema.release.is_none() || array.release.is_none() {
            return Err(PyValueError::new_err(format!(
                "invalid value for {what}: released Arrow array"
            )));
        }
        let format = unsafe { CStr::from_ptr(schema.format) }
            .to_string_lossy()
            .into_owned();
        let large = match format.as_str() {
            "z" | "u" => false,
            "Z" | "U" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "invalid value for {what}: Arrow type with format {other:?} is not binary, large_binary, string or large_string"
                )))
            }
        };
        if array.n_buffers != 3 || array.length < 0 || array.offset < 0 {
            return Err(PyValueError::new_err(format!(
                "invalid value for {what}: malformed Arrow binary array"
            )));
        }
        let buffers = unsafe { std::slice::from_raw_parts(array.buffers, 3) };
        Ok(BinaryColumn {
            len: array.length as usize,
            offset: array.offset as usize,
            large,
            validity: buffers[0] as *const u8,
            offsets: buffers[1] as *const u8,
            data: buffers[2] as *const u8,
            _keep: (schema_cap.unbind(), array_cap.unbind()),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The column as a `DenseBinary` when it has no validity bitmap (no
    /// nulls) and 32-bit offsets (`binary`, `string`), the shape pyarrow
    /// gives a column without nulls.
    pub(crate) fn dense(&self) -> Option<DenseBinary<'_>> {
        (self.validity.is_null() && !self.large).then(|| DenseBinary {
            // SAFETY: `offset` is within the offsets buffer of a valid array.
            offsets: unsafe { (self.offsets as *const i32).add(self.offset) },
            data: self.data,
            len: self.len,
            _column: std::marker::PhantomData,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element `i` (0-based, before the array's own offset), None if null.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        assert!(i < self.len, "index checked by callers");
        let j = i + self.offset;
        // SAFETY: j < offset + length, inside the buffers the producer sized.
        unsafe {
            if !self.validity.is_null() && (*self.validity.add(j / 8) >> (j % 8)) & 1 == 0 {
                return None;
            }
            let (start, end) = if self.large {
                let o = self.offsets as *const i64;
                (
                    o.add(j).read_unaligned() as usize,
                    o.add(j + 1).read_unaligned() as usize,
                )
            } else {
                let o = self.offsets as *const i32;
                (
                    o.add(j).read_unaligned() as usize,
                    o.add(j + 1).read_unaligned() as usize,
                )
            };
            if end <= start {
                // Also covers an all-empty column whose data buffer is null.
                return Some(&[]);
            }
            Some(std::slice::from_raw_parts(
                self.data.add(start),
                end - start,
            ))
        }
    }
}

// ----- export: poll_arrow's batches -------------------------------------------------
//
// The C Data Interface by hand for one fixed schema (Spark's Kafka source
// columns), instead of pulling arrow-rs into the bindings: the layouts are
// few and simple. Every node (the struct array and each child) owns its
// buffers through `private_data`; `release` frees a node and its children,
// as the interface requires (an importer may also move a child out and
// release it on its own).

use ferrokafka_net::consumer::pool::ColumnPool;
use ferrokafka_net::consumer::records::{BinaryBuf, RecordColumns};
use std::ffi::CString;
use std::sync::Arc;

const ARROW_FLAG_NULLABLE: i64 = 2;

enum Data {
    U8(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// One exported buffer. Released by the importer on whatever thread drops
/// the array last; the memory then goes back to the consumer's column pool
/// (docs/semantics.md §8.7) when the columns came from one.
struct Buf {
    data: Data,
    pool: Option<Arc<ColumnPool>>,
}

impl Buf {
    fn ptr(&self) -> *const c_void {
        match &self.data {
            Data::U8(v) => v.as_ptr() as *const c_void,
            Data::I32(v) => v.as_ptr() as *const c_void,
            Data::I64(v) => v.as_ptr() as *const c_void,
        }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else { return };
        match std::mem::replace(&mut self.data, Data::U8(Vec::new())) {
            Data::U8(v) => pool.give(v),
            Data::I32(v) => pool.give(v),
            Data::I64(v) => pool.give(v),
        }
    }
}

/// Makes the buffers of one export, from and back to one pool (or none).
struct Out(Option<Arc<ColumnPool>>);

impl Out {
    fn buf(&self, data: Data) -> Option<Buf> {
        Some(Buf {
            data,
            pool: self.0.clone(),
        })
    }

    fn vec<T: ferrokafka_net::consumer::pool::Column>(&self, n: usize) -> Vec<T> {
        match &self.0 {
            Some(p) => p.take(n),
            None => Vec::with_capacity(n),
        }
    }
}

struct ArrayNode {
    length: usize,
    null_count: usize,
    buffers: Vec<Option<Buf>>,
    children: Vec<ArrayNode>,
}

struct SchemaNode {
    format: &'static str,
    name: &'static str,
    children: Vec<SchemaNode>,
}

struct ArrayPrivate {
    _bufs: Vec<Option<Buf>>,
    buf_ptrs: Vec<*const c_void>,
    children: Vec<*mut FfiArray>,
}

struct SchemaPrivate {
    _format: CString,
    _name: CString,
    children: Vec<*mut FfiSchema>,
}

unsafe extern "C" fn release_array(a: *mut FfiArray) {
    if a.is_null() || (*a).release.is_none() {
        return;
    }
    let private = Box::from_raw((*a).private_data as *mut ArrayPrivate);
    for &c in &private.children {
        if let Some(r) = (*c).release {
            r(c);
        }
        drop(Box::from_raw(c));
    }
    (*a).release = None;
}

unsafe extern "C" fn release_schema(s: *mut FfiSchema) {
    if s.is_null() || (*s).release.is_none() {
        return;
    }
    let private = Box::from_raw((*s).private_data as *mut SchemaPrivate);
    for &c in &private.children {
        if let Some(r) = (*c).release {
            r(c);
        }
        drop(Box::from_raw(c));
    }
    (*s).release = None;
}

fn export_array(node: ArrayNode) -> FfiArray {
    let children: Vec<*mut FfiArray> = node
        .children
        .into_iter()
        .map(|c| Box::into_raw(Box::new(export_array(c))))
        .collect();
    let buf_ptrs: Vec<*const c_void> = node
        .buffers
        .iter()
        .map(|b| b.as_ref().map_or(std::ptr::null(), Buf::ptr))
        .collect();
    let mut private = Box::new(ArrayPrivate {
        _bufs: node.buffers,
        buf_ptrs,
        children,
    });
    FfiArray {
        length: node.length as i64,
        null_count: node.null_count as i64,
        offset: 0,
        n_buffers: private.buf_ptrs.len() as i64,
        n_children: private.children.len() as i64,
        buffers: private.buf_ptrs.as_mut_ptr(),
        children: private.children.as_mut_ptr(),
        dictionary: std::ptr::null_mut(),
        release: Some(release_array),
        private_data: Box::into_raw(private) as *mut c_void,
    }
}

fn export_schema(node: SchemaNode) -> FfiSchema {
    let children: Vec<*mut FfiSchema> = node
        .children
        .into_iter()
        .map(|c| Box::into_raw(Box::new(export_schema(c))))
        .collect();
    let format = CString::new(node.format).expect("static format");
    let name = CString::new(node.name).expect("static name");
    let mut private = Box::new(SchemaPrivate {
        _format: format,
        _name: name,
        children,
    });
    FfiSchema {
        format: private._format.as_ptr(),
        name: private._name.as_ptr(),
        metadata: std::ptr::null(),
        flags: ARROW_FLAG_NULLABLE,
        n_children: private.children.len() as i64,
        children: private.children.as_mut_ptr(),
        dictionary: std::ptr::null_mut(),
        release: Some(release_schema),
        private_data: Box::into_raw(private) as *mut c_void,
    }
}

/// `nulls`: how many of `valid` are false (`BinaryBuf::null_count`).
fn bitmap(out: &Out, valid: &[bool], nulls: usize) -> (Option<Buf>, usize) {
    if nulls == 0 {
        return (None, 0);
    }
    let len = valid.len().div_ceil(8);
    let mut bits = out.vec(len);
    if nulls == valid.len() {
        // Every row null (the keys of unkeyed records): zeros, one memset.
        bits.resize(len, 0);
    } else {
        // Eight rows a byte, without a branch per row.
        bits.extend(valid.chunks(8).map(|rows| {
            rows.iter()
                .enumerate()
                .fold(0u8, |b, (i, v)| b | (u8::from(*v) << i))
        }));
    }
    (out.buf(Data::U8(bits)), nulls)
}

/// The topic and partition columns from (topic, partition, row count) runs
/// in row order, built with the sizes known up front (no validity bitmap:
/// never null) instead of a push per row.
fn topic_partition_columns(
    out: &Out,
    runs: &[(Arc<str>, i32, usize)],
    n: usize,
) -> (ArrayNode, ArrayNode) {
    let bytes: usize = runs.iter().map(|(t, _, c)| t.len() * c).sum();
    let mut offsets = out.vec(n + 1);
    let mut data = out.vec(bytes);
    let mut partitions = out.vec(n);
    offsets.push(0i32);
    for (t, p, count) in runs {
        let (t, count) = (t.as_bytes(), *count);
        // The run's offsets are an arithmetic progression, and its data the
        // name `count` times, written by doubling copies: a few large
        // memcpys instead of a small one per row (on the calling thread,
        // which holds the GIL).
        let (base, len) = (data.len() as i32, t.len() as i32);
        offsets.extend((1..=count as i32).map(|i| base + i * len));
        let start = data.len();
        let end = start + t.len() * count;
        if count > 0 {
            data.extend_from_slice(t);
        }
        while data.len() < end {
            let have = data.len() - start;
            data.extend_from_within(start..start + have.min(end - data.len()));
        }
        partitions.extend(std::iter::repeat_n(*p, count));
    }
    let topic = ArrayNode {
        length: n,
        null_count: 0,
        buffers: vec![None, out.buf(Data::I32(offsets)), out.buf(Data::U8(data))],
        children: vec![],
    };
    (topic, primitive(out, Data::I32(partitions), n))
}

/// A binary column: its offsets and data move into the export; the
/// validity (bools) stays behind and goes back with the columns.
fn binary(out: &Out, b: &mut BinaryBuf) -> ArrayNode {
    let (validity, nulls) = bitmap(out, &b.valid, b.null_count());
    ArrayNode {
        length: b.valid.len(),
        null_count: nulls,
        buffers: vec![
            validity,
            out.buf(Data::I32(std::mem::take(&mut b.offsets))),
            out.buf(Data::U8(std::mem::take(&mut b.data))),
        ],
        children: vec![],
    }
}

fn primitive(out: &Out, v: Data, length: usize) -> ArrayNode {
    ArrayNode {
        length,
        null_count: 0,
        buffers: vec![None, out.buf(v)],
        children: vec![],
    }
}

fn leaf(format: &'static str, name: &'static str) -> SchemaNode {
    SchemaNode {
        format,
        name,
        children: vec![],
    }
}

/// A batch ready to export: the struct array's tree and its schema.
pub struct ExportedBatch {
    array: ArrayNode,
}

// SAFETY: plain owned vectors; the raw pointers only appear in export.
unsafe impl Send for ExportedBatch {}

#[repr(transparent)]
struct SendSchema(FfiSchema);
unsafe impl Send for SendSchema {}
#[repr(transparent)]
struct SendArray(FfiArray);
unsafe impl Send for SendArray {}

impl ExportedBatch {
    /// `runs`: (topic, partition, row count) in row order. The buffers
    /// come from (and go back to) the columns' pool, if they have one.
    pub fn new(mut cols: RecordColumns, runs: &[(Arc<str>, i32, usize)]) -> Self {
        let n = cols.offsets.len();
        let out = Out(cols.pool.clone());
        let (topic, partition) = topic_partition_columns(&out, runs, n);
        // Spark's timestamp is microseconds (converted in place).
        let mut ts = std::mem::take(&mut cols.timestamps);
        for t in ts.iter_mut() {
            *t = t.saturating_mul(1000);
        }
        let headers = ArrayNode {
            length: n,
            null_count: 0,
            buffers: vec![
                None,
                out.buf(Data::I32(std::mem::take(&mut cols.header_offsets))),
            ],
            children: vec![ArrayNode {
                length: cols.header_keys.len(),
                null_count: 0,
                buffers: vec![None],
                children: vec![
                    binary(&out, &mut cols.header_keys),
                    binary(&out, &mut cols.header_values),
                ],
            }],
        };
        let array = ArrayNode {
            length: n,
            null_count: 0,
            buffers: vec![None],
            children: vec![
                binary(&out, &mut cols.keys),
                binary(&out, &mut cols.values),
                topic,
                partition,
                primitive(&out, Data::I64(std::mem::take(&mut cols.offsets)), n),
                primitive(&out, Data::I64(ts), n),
                primitive(
                    &out,
                    Data::I32(std::mem::take(&mut cols.timestamp_types)),
                    n,
                ),
                headers,
            ],
        };
        // `cols` drops here with what the export does not use (validity
        // bools, leader epochs): back to the pool too.
        ExportedBatch { array }
    }

    /// A batch of no rows (an empty poll).
    pub fn empty() -> Self {
        ExportedBatch::new(RecordColumns::new(), &[])
    }

    /// The struct array alone, for a stream whose schema went once
    /// (`arrow_stream`).
    pub(crate) fn into_array(self) -> FfiArray {
        export_array(self.array)
    }

    /// The schema of every batch, exported (`arrow_stream`).
    pub(crate) fn schema_ffi() -> FfiSchema {
        export_schema(ExportedBatch::schema())
    }

    /// The one definition of the columns (Spark's Kafka source): Python
    /// reads it through `record_batch_schema` for its empty batches and
    /// Spark's DDL instead of spelling the columns again.
    fn schema() -> SchemaNode {
        SchemaNode {
            format: "+s",
            name: "",
            children: vec![
                leaf("z", "key"),
                leaf("z", "value"),
                leaf("u", "topic"),
                leaf("i", "partition"),
                leaf("l", "offset"),
                leaf("tsu:UTC", "timestamp"),
                leaf("i", "timestampType"),
                SchemaNode {
                    format: "+l",
                    name: "headers",
                    children: vec![SchemaNode {
                        format: "+s",
                        name: "item",
                        children: vec![leaf("u", "key"), leaf("z", "value")],
                    }],
                },
            ],
        }
    }

    pub fn into_capsules<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let s = schema_capsule(py)?;
        let array = SendArray(export_array(self.array));
        // The importer moves the structs out and marks them released; if it
        // never does (capsule dropped unused), the destructor frees them.
        let a = PyCapsule::new_with_value_and_destructor(
            py,
            array,
            c"arrow_array",
            |mut a, _| unsafe {
                if let Some(r) = a.0.release {
                    r(&mut a.0);
                }
            },
        )?;
        PyTuple::new(py, [s.into_any(), a.into_any()])
    }
}

/// The schema of `poll_arrow` batches as an `arrow_schema` capsule (released
/// by its destructor unless an importer moved it out).
fn schema_capsule(py: Python<'_>) -> PyResult<Bound<'_, PyCapsule>> {
    let schema = SendSchema(export_schema(ExportedBatch::schema()));
    PyCapsule::new_with_value_and_destructor(py, schema, c"arrow_schema", |mut s, _| unsafe {
        if let Some(r) = s.0.release {
            r(&mut s.0);
        }
    })
}

/// The Arrow schema of `poll_arrow` batches (an `arrow_schema` PyCapsule,
/// for `__arrow_c_schema__`).
#[pyfunction]
pub fn record_batch_schema(py: Python<'_>) -> PyResult<Bound<'_, PyCapsule>> {
    schema_capsule(py)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokafka_net::consumer::fetch::AbortedTransactionFilter;
    use ferrokafka_net::consumer::records::decode_fetched;
    use ferrokafka_protocol::compression::Compression;
    use ferrokafka_protocol::record::{DecodeOptions, RecordBatchBuilder};

    fn run(pool: &Arc<ColumnPool>, n: usize) -> RecordColumns {
        let mut b = RecordBatchBuilder::new(Compression::None);
        for i in 0..n {
            let key = (i % 3 != 0).then_some(&b"k"[..]);
            b.append(i as i64, key, Some(&[7u8; 100][..]), &[]).unwrap();
        }
        let blob = b.finish().unwrap();
        let mut f = AbortedTransactionFilter::new(false, vec![]);
        decode_fetched(&blob, 0, DecodeOptions::default(), &mut f, Some(pool))
            .unwrap()
            .records
    }

    #[test]
    fn released_arrow_buffers_go_back_to_the_consumers_pool() {
        let pool = ColumnPool::new(1 << 20);
        let cols = run(&pool, 500);
        let values = cols.values.data.as_ptr();
        let batch = ExportedBatch::new(cols, &[(Arc::from("t"), 0, 500)]);
        // What the export does not use (validity bools, leader epochs) is
        // back already; the exported buffers are not, until released.
        let before = pool.kept_bytes();
        let mut array = export_array(batch.array);
        assert_eq!(pool.kept_bytes(), before);
        // SAFETY: the array was just exported and is released once.
        unsafe { release_array(&mut array) };
        assert!(array.release.is_none());
        // The 50,000 value bytes among them: the next run writes there.
        assert!(pool.kept_bytes() >= before + 50_000);
        let next = run(&pool, 500);
        assert_eq!(next.values.data.as_ptr(), values);
        assert_eq!(next.values.get(499), Some(&[7u8; 100][..]));
    }

    fn bytes(b: &Option<Buf>) -> Vec<u8> {
        match b.as_ref().map(|b| &b.data) {
            Some(Data::U8(v)) => v.clone(),
            _ => panic!("not a byte buffer"),
        }
    }

    fn ints(b: &Option<Buf>) -> Vec<i32> {
        match b.as_ref().map(|b| &b.data) {
            Some(Data::I32(v)) => v.clone(),
            _ => panic!("not an i32 buffer"),
        }
    }

    #[test]
    fn topic_and_partition_columns_repeat_each_run_row_by_row() {
        // Runs of 0, 1, 2, 3 and 1,000 rows (the doubling copy's edges),
        // an empty name, and names of different lengths in one batch.
        let runs: Vec<(Arc<str>, i32, usize)> = vec![
            (Arc::from("orders"), 0, 3),
            (Arc::from("x"), 5, 0),
            (Arc::from(""), 1, 2),
            (Arc::from("payments-eu"), 2, 1000),
            (Arc::from("x"), 7, 1),
        ];
        let n = runs.iter().map(|r| r.2).sum();
        let (topic, partition) = topic_partition_columns(&Out(None), &runs, n);
        let (mut offsets, mut data, mut parts) = (vec![0i32], Vec::new(), Vec::new());
        for (t, p, c) in &runs {
            for _ in 0..*c {
                data.extend_from_slice(t.as_bytes());
                offsets.push(data.len() as i32);
                parts.push(*p);
            }
        }
        assert_eq!(topic.length, n);
        assert_eq!(ints(&topic.buffers[1]), offsets);
        assert_eq!(bytes(&topic.buffers[2]), data);
        assert_eq!(ints(&partition.buffers[1]), parts);
    }

    #[test]
    fn validity_bitmaps_for_no_some_and_all_nulls() {
        let out = Out(None);
        assert!(bitmap(&out, &[true; 9], 0).0.is_none());
        let (all, nulls) = bitmap(&out, &[false; 9], 9);
        assert_eq!((bytes(&all), nulls), (vec![0, 0], 9));
        let some: Vec<bool> = (0..11).map(|i| i % 3 != 0).collect();
        let (b, nulls) = bitmap(&out, &some, 4);
        assert_eq!((bytes(&b), nulls), (vec![0b1011_0110, 0b0000_0101], 4));
    }
}

/// A `BinaryColumn` without nulls and with 32-bit offsets, read by `get`
/// with neither check per item.
///
/// Why: `send_batch`'s per-record reader goes into the producer's append
/// loop, and `BinaryColumn::get`, with its validity and offset-width
/// branches, made it too large to be inlined there: a call per record,
/// whose every field (the column's buffers, reached through four pointers)
/// was loaded again each time. Small and `Copy`, its fields stay in the
/// loop's registers: `benches/instructions.py --mode arrow` 288 -> 217
/// instructions a record on the calling thread, `ab_builds.py --mode
/// send_batch_arrow` (8 rounds) 0.037 -> 0.032 µs a record at best
/// (session 33).
#[derive(Clone, Copy)]
pub(crate) struct DenseBinary<'c> {
    offsets: *const i32,
    data: *const u8,
    len: usize,
    _column: std::marker::PhantomData<&'c BinaryColumn>,
}

// SAFETY: as `BinaryColumn`'s: reads of immutable buffers the column keeps
// alive for at least `'c`.
unsafe impl Send for DenseBinary<'_> {}
unsafe impl Sync for DenseBinary<'_> {}

impl crate::producer::ItemSizes for DenseBinary<'_> {
    #[inline]
    fn size_of(&self, i: usize) -> i32 {
        self.get(i).len() as i32
    }
}

impl<'c> DenseBinary<'c> {
    /// Item `i`'s bytes, as `BinaryColumn::get` reads them.
    #[inline(always)]
    pub(crate) fn get(self, i: usize) -> &'c [u8] {
        assert!(i < self.len, "index checked by callers");
        // SAFETY: i + 1 <= len offsets past the column's offset, inside the
        // offsets buffer; each item's bytes inside the data buffer.
        unsafe {
            let start = self.offsets.add(i).read_unaligned() as usize;
            let end = self.offsets.add(i + 1).read_unaligned() as usize;
            if end <= start {
                // Also covers an all-empty column whose data buffer is null.
                return &[];
            }
            std::slice::from_raw_parts(self.data.add(start), end - start)
        }
    }
}
