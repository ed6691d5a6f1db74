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
struct FfiSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut FfiSchema,
    dictionary: *mut FfiSchema,
    release: Option<unsafe extern "C" fn(*mut FfiSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
struct FfiArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut FfiArray,
    dictionary: *mut FfiArray,
    release: Option<unsafe extern "C" fn(*mut FfiArray)>,
    private_data: *mut c_void,
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

impl BinaryColumn {
    pub fn from_pycapsule(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
        let pair = obj.call_method0("__arrow_c_array__")?;
        let pair = pair.cast::<PyTuple>().map_err(|_| PyValueError::new_err(format!("invalid value for {what}: __arrow_c_array__ did not return a tuple")))?;
        let schema_cap = pair.get_item(0)?.cast_into::<PyCapsule>().map_err(|_| PyValueError::new_err(format!("invalid value for {what}: not an Arrow schema capsule")))?;
        let array_cap = pair.get_item(1)?.cast_into::<PyCapsule>().map_err(|_| PyValueError::new_err(format!("invalid value for {what}: not an Arrow array capsule")))?;
        // SAFETY: capsule names are checked by `pointer_checked`; the structs
        // are the C Data Interface's, valid while the capsules live.
        let schema = unsafe { &*(schema_cap.pointer_checked(Some(c"arrow_schema"))?.as_ptr() as *const FfiSchema) };
        let array = unsafe { &*(array_cap.pointer_checked(Some(c"arrow_array"))?.as_ptr() as *const FfiArray) };
        if schema.release.is_none() || array.release.is_none() {
            return Err(PyValueError::new_err(format!("invalid value for {what}: released Arrow array")));
        }
        let format = unsafe { CStr::from_ptr(schema.format) }.to_string_lossy().into_owned();
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
            return Err(PyValueError::new_err(format!("invalid value for {what}: malformed Arrow binary array")));
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

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element `i` (0-based, before the array's own offset), None if null.
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
                (o.add(j).read_unaligned() as usize, o.add(j + 1).read_unaligned() as usize)
            } else {
                let o = self.offsets as *const i32;
                (o.add(j).read_unaligned() as usize, o.add(j + 1).read_unaligned() as usize)
            };
            if end <= start {
                // Also covers an all-empty column whose data buffer is null.
                return Some(&[]);
            }
            Some(std::slice::from_raw_parts(self.data.add(start), end - start))
        }
    }
}
