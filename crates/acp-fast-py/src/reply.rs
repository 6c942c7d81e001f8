//! Python strings for the hot path: a chunk's text made by one copy when it is known to be ASCII,
//! and the reply of a turn assembled straight into the `str` that is returned.

use pyo3::prelude::*;
use pyo3::types::PyString;

/// A `str` of `text`; when the caller knows it is ASCII, made by one copy into a new compact
/// ASCII object instead of a UTF-8 decode (which costs about twice as much for a 32-byte chunk:
/// callgrind, benches case (a)). Empty and one-character strings go through CPython, which
/// hands out its shared objects for them.
pub(crate) fn text_object(py: Python<'_>, text: &str, known_ascii: bool) -> PyResult<Py<PyString>> {
    use pyo3::ffi;
    if !known_ascii || text.len() < 2 {
        return Ok(PyString::new(py, text).unbind());
    }
    // SAFETY: the GIL is held; PyUnicode_New gives a new str of `len` 1-byte characters (or
    // NULL with an exception set), which we fill completely before anyone sees it.
    unsafe {
        let object = ffi::PyUnicode_New(text.len() as ffi::Py_ssize_t, 127);
        if object.is_null() {
            return Err(PyErr::fetch(py));
        }
        std::ptr::copy_nonoverlapping(text.as_ptr(), ffi::PyUnicode_1BYTE_DATA(object), text.len());
        Ok(Bound::from_owned_ptr(py, object)
            .cast_into_unchecked::<PyString>()
            .unbind())
    }
}

/// An owned reference to a `str` being written (released on drop, e.g. after an error).
pub(crate) struct OwnedStr(*mut pyo3::ffi::PyObject);

impl OwnedStr {
    fn into_raw(self) -> *mut pyo3::ffi::PyObject {
        let pointer = self.0;
        std::mem::forget(self);
        pointer
    }
}

// SAFETY: the object is only touched with the GIL held: every method that writes it takes a
// `Python` token, and drop attaches to the interpreter first. (The asyncio driver keeps a
// running turn's reply between steps, inside the client's lock.)
unsafe impl Send for OwnedStr {}

impl Drop for OwnedStr {
    fn drop(&mut self) {
        if !self.0.is_null() {
            let object = self.0;
            // SAFETY: an owned reference, released with the GIL held.
            Python::attach(|_| unsafe { pyo3::ffi::Py_DECREF(object) });
        }
    }
}

/// The reply text, written straight into the `str` that will be returned while it is ASCII
/// (grown by doubling; `PyUnicode_Resize` reallocates in place where it can), so a long reply is
/// copied once and never re-decoded. The first non-ASCII chunk moves it to a byte buffer that is
/// decoded once at the end.
#[derive(Default)]
pub(crate) enum ReplyBuilder {
    #[default]
    Empty,
    Ascii {
        /// A compact ASCII `str` of `capacity` characters, `len` of them written.
        text: OwnedStr,
        len: usize,
        capacity: usize,
    },
    Utf8(Vec<u8>),
    /// Python could not allocate; reported at `finish`.
    Failed,
}

impl ReplyBuilder {
    /// Appends a chunk; `known_ascii` saves the ASCII scan when the caller already knows.
    pub(crate) fn push(&mut self, _py: Python<'_>, chunk: &str, known_ascii: bool) {
        use pyo3::ffi;
        if chunk.is_empty() {
            return;
        }
        let is_ascii = known_ascii || chunk.is_ascii();
        if let ReplyBuilder::Empty = self {
            *self = if is_ascii {
                let capacity = chunk.len().max(4096);
                // SAFETY: the GIL is held (the `_py` token); a new object or NULL comes back.
                let object = unsafe { ffi::PyUnicode_New(capacity as ffi::Py_ssize_t, 127) };
                if object.is_null() {
                    ReplyBuilder::Failed
                } else {
                    ReplyBuilder::Ascii {
                        text: OwnedStr(object),
                        len: 0,
                        capacity,
                    }
                }
            } else {
                ReplyBuilder::Utf8(Vec::new())
            };
        }
        match self {
            ReplyBuilder::Ascii {
                text,
                len,
                capacity,
            } => {
                if !is_ascii {
                    // SAFETY: `text` is a live compact ASCII str with `len` bytes written.
                    let written = unsafe {
                        std::slice::from_raw_parts(ffi::PyUnicode_1BYTE_DATA(text.0), *len)
                    };
                    let mut bytes = Vec::with_capacity(*len + chunk.len());
                    bytes.extend_from_slice(written);
                    bytes.extend_from_slice(chunk.as_bytes());
                    *self = ReplyBuilder::Utf8(bytes);
                    return;
                }
                let needed = *len + chunk.len();
                if needed > *capacity {
                    let grown = needed.max(capacity.saturating_mul(2));
                    // SAFETY: the str is ours alone (refcount 1, never shared or hashed), as
                    // PyUnicode_Resize requires; on failure it releases it and writes NULL.
                    let status =
                        unsafe { ffi::PyUnicode_Resize(&mut text.0, grown as ffi::Py_ssize_t) };
                    if status != 0 || text.0.is_null() {
                        *self = ReplyBuilder::Failed;
                        return;
                    }
                    *capacity = grown;
                }
                // SAFETY: capacity >= needed, and the data is 1 byte per character.
                unsafe {
                    let data = ffi::PyUnicode_1BYTE_DATA(text.0).add(*len);
                    std::ptr::copy_nonoverlapping(chunk.as_ptr(), data, chunk.len());
                }
                *len = needed;
            }
            ReplyBuilder::Utf8(bytes) => bytes.extend_from_slice(chunk.as_bytes()),
            ReplyBuilder::Empty | ReplyBuilder::Failed => {}
        }
    }

    /// v2: the reply's bytes `at..at + remove` become `text` (a message replaced by its
    /// upsert, or a chunk of an earlier message). Offsets are the connection's, in bytes of the
    /// reply as pushed; out of range they are clamped (never a panic on a host's reply).
    pub(crate) fn splice(
        &mut self,
        py: Python<'_>,
        at: usize,
        remove: usize,
        text: &str,
        known_ascii: bool,
    ) {
        use pyo3::ffi;
        if let ReplyBuilder::Empty = self {
            self.push(py, text, known_ascii);
            return;
        }
        let is_ascii = known_ascii || text.is_ascii();
        if let ReplyBuilder::Ascii {
            text: held, len, ..
        } = self
        {
            if !is_ascii {
                // SAFETY: `held` is a live compact ASCII str with `len` bytes written.
                let written =
                    unsafe { std::slice::from_raw_parts(ffi::PyUnicode_1BYTE_DATA(held.0), *len) };
                *self = ReplyBuilder::Utf8(written.to_vec());
            }
        }
        match self {
            ReplyBuilder::Ascii {
                text: held,
                len,
                capacity,
            } => {
                let at = at.min(*len);
                let remove = remove.min(*len - at);
                let needed = *len - remove + text.len();
                if needed > *capacity {
                    let grown = needed.max(capacity.saturating_mul(2));
                    // SAFETY: as in `push`: the str is ours alone.
                    let status =
                        unsafe { ffi::PyUnicode_Resize(&mut held.0, grown as ffi::Py_ssize_t) };
                    if status != 0 || held.0.is_null() {
                        *self = ReplyBuilder::Failed;
                        return;
                    }
                    *capacity = grown;
                }
                // SAFETY: capacity >= needed and >= len; 1 byte per character. The tail moves
                // first (`copy` allows overlap), then the text fills the gap.
                unsafe {
                    let data = ffi::PyUnicode_1BYTE_DATA(held.0);
                    let tail = *len - at - remove;
                    std::ptr::copy(data.add(at + remove), data.add(at + text.len()), tail);
                    std::ptr::copy_nonoverlapping(text.as_ptr(), data.add(at), text.len());
                }
                *len = needed;
            }
            ReplyBuilder::Utf8(bytes) => {
                let at = at.min(bytes.len());
                let end = at.saturating_add(remove).min(bytes.len());
                bytes.splice(at..end, text.bytes());
            }
            ReplyBuilder::Empty | ReplyBuilder::Failed => {}
        }
    }

    pub(crate) fn finish(self, py: Python<'_>) -> PyResult<Py<PyString>> {
        use pyo3::ffi;
        match self {
            ReplyBuilder::Empty => Ok(PyString::new(py, "").unbind()),
            ReplyBuilder::Ascii { text, len, .. } => {
                let mut object = text.into_raw();
                // SAFETY: as in `push`; shrinking to the written length also writes the NUL.
                if unsafe { ffi::PyUnicode_Resize(&mut object, len as ffi::Py_ssize_t) } != 0 {
                    return Err(PyErr::fetch(py));
                }
                // SAFETY: `object` is an owned reference to a str.
                Ok(unsafe { Bound::from_owned_ptr(py, object) }
                    .cast_into::<PyString>()?
                    .unbind())
            }
            ReplyBuilder::Utf8(bytes) => {
                // Whole chunks and messages are valid UTF-8; a splice clamped out of range
                // (never by the connection's own offsets) must not panic the host.
                let text = String::from_utf8_lossy(&bytes);
                Ok(PyString::new(py, &text).unbind())
            }
            ReplyBuilder::Failed => Err(PyErr::fetch(py)),
        }
    }
}

/// The reply of each session's running turn, by session id. A few entries at most (one turn
/// per session), looked up once per joined chunk: a short scan comparing ids costs less than
/// hashing one.
#[derive(Default)]
pub(crate) struct Replies(Vec<(String, ReplyBuilder)>);

impl Replies {
    #[inline]
    pub fn get_mut(&mut self, session_id: &str) -> Option<&mut ReplyBuilder> {
        self.0
            .iter_mut()
            .find(|(id, _)| id == session_id)
            .map(|(_, reply)| reply)
    }

    /// A new turn's reply (replacing the session's earlier one, if any).
    pub fn insert(&mut self, session_id: String, reply: ReplyBuilder) {
        self.remove(&session_id);
        self.0.push((session_id, reply));
    }

    pub fn remove(&mut self, session_id: &str) -> Option<ReplyBuilder> {
        let index = self.0.iter().position(|(id, _)| id == session_id)?;
        Some(self.0.swap_remove(index).1)
    }
}
