//! The fast path for the commonest line: a text chunk in the shape nearly every agent writes,
//! matched byte for byte before serde is asked.

/// A text chunk in the shape nearly every agent writes, read without serde.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextChunk<'a> {
    /// The whole line.
    pub text_line: &'a str,
    pub session_id: &'a str,
    /// The `sessionUpdate` value.
    pub session_update: &'a str,
    /// The content block's text.
    pub text: &'a str,
    /// v2's `messageId`, before or after `content`.
    pub message_id: Option<&'a str>,
    /// The whole line is ASCII.
    pub ascii: bool,
}

const CHUNK_PARTS: [&[u8]; 4] = [
    br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":""#,
    br#"","update":{"sessionUpdate":""#,
    br#"","content":{"type":"text","text":""#,
    br#""}}}}"#,
];

/// The string at the start of `rest` up to its closing quote, when it needs no decoding (no
/// escapes, no control characters); `None` sends the line to the general parser.
/// Also tells whether the string is ASCII, found in the same pass.
fn plain_string(rest: &[u8]) -> Option<(&[u8], &[u8], bool)> {
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    if rest[end] != b'"' {
        return None;
    }
    let value = &rest[..end];
    // JSON forbids raw control characters in strings; the general parser reports them.
    let (control, high) = control_and_high(value);
    if control {
        return None;
    }
    Some((value, &rest[end + 1..], !high))
}

/// Whether `bytes` holds a byte below 0x20 and whether it holds one of 0x80 or above, eight
/// bytes at a time (a byte loop cost about two instructions a byte on every chunk's strings).
fn control_and_high(bytes: &[u8]) -> (bool, bool) {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut control = 0u64;
    let mut high = 0u64;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let w = u64::from_ne_bytes(word.try_into().expect("eight bytes"));
        // A byte below 0x20 borrows in `w - 0x20..` and has its top bit clear in `w`; the
        // first such byte is always flagged (later flags may be spurious, which is fine:
        // only whether any exists matters).
        control |= w.wrapping_sub(ONES * 0x20) & !w;
        high |= w;
    }
    let tail = words.remainder();
    let (tail_control, tail_high) = tail.iter().fold((false, false), |(control, high), b| {
        (control | (*b < 0x20), high | (*b >= 0x80))
    });
    (
        control & HIGHS != 0 || tail_control,
        high & HIGHS != 0 || tail_high,
    )
}

/// Reads a `session/update` line laid out exactly as
/// `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":S,"update":{"sessionUpdate":K,"content":{"type":"text","text":T}}}}`
/// with plain strings S, K, T. Every byte outside the three strings is fixed, so a match is
/// valid JSON with the same meaning `classify` gives it; anything else returns `None` and takes
/// the general path.
pub fn text_chunk(line: &[u8]) -> Option<TextChunk<'_>> {
    let mut rest = line.strip_prefix(CHUNK_PARTS[0])?;
    let mut ascii = true;
    fn take<'l>(rest: &mut &'l [u8], ascii: &mut bool) -> Option<&'l [u8]> {
        let (value, after, value_ascii) = plain_string(rest)?;
        *ascii &= value_ascii;
        *rest = after;
        Some(value)
    }
    let session_id = take(&mut rest, &mut ascii)?;
    rest = rest.strip_prefix(&CHUNK_PARTS[1][1..])?;
    let session_update = take(&mut rest, &mut ascii)?;
    // v2's chunks carry a `messageId`: the SDKs write it before or after `content`.
    // One byte tells the layouts apart (`,"m` from `,"c`, `},` from `}}`), so a v1 line pays
    // a byte compare here, not a failed prefix compare.
    let mut message_id = None;
    if rest.get(2) == Some(&b'm') {
        rest = rest.strip_prefix(MESSAGE_ID_BEFORE)?;
        message_id = Some(take(&mut rest, &mut ascii)?);
    }
    rest = rest.strip_prefix(&CHUNK_PARTS[2][1..])?;
    let text = take(&mut rest, &mut ascii)?;
    if rest.get(1) == Some(&b',') && message_id.is_none() {
        rest = rest.strip_prefix(MESSAGE_ID_AFTER)?;
        message_id = Some(take(&mut rest, &mut ascii)?);
        rest = rest.strip_prefix(br#"}}}"#)?;
    } else {
        rest = rest.strip_prefix(&CHUNK_PARTS[3][1..])?;
    }
    if !rest.is_empty() {
        return None;
    }
    let text_line = if ascii {
        // SAFETY: every byte is ASCII (the template's, and the strings' as just checked).
        unsafe { std::str::from_utf8_unchecked(line) }
    } else {
        std::str::from_utf8(line).ok()?
    };
    // SAFETY: each string is a sub-slice of `line`, which is valid UTF-8, and starts and ends
    // next to an ASCII quote, so it starts and ends on character boundaries.
    fn text_of(bytes: &[u8]) -> &str {
        // SAFETY: as above, the caller's slices are whole strings of a UTF-8 line.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
    Some(TextChunk {
        text_line,
        session_id: text_of(session_id),
        session_update: text_of(session_update),
        text: text_of(text),
        message_id: message_id.map(text_of),
        ascii,
    })
}

/// Where v2's `messageId` sits in a chunk line: right after `sessionUpdate`, or after the content
/// object (then the line ends `"}}}`).
const MESSAGE_ID_BEFORE: &[u8] = br#","messageId":""#;
const MESSAGE_ID_AFTER: &[u8] = br#"},"messageId":""#;

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time scan says what the byte loop says, for every byte value at every
    /// position of strings up to 24 bytes, alone and next to others.
    #[test]
    fn control_and_high_match_a_byte_loop() {
        let by_bytes = |bytes: &[u8]| {
            (
                bytes.iter().any(|b| *b < 0x20),
                bytes.iter().any(|b| *b >= 0x80),
            )
        };
        for len in 0..=24 {
            for at in 0..len {
                for value in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = value;
                    assert_eq!(control_and_high(&bytes), by_bytes(&bytes), "{bytes:?}");
                    bytes[len - 1 - at] = 0x1f;
                    assert_eq!(control_and_high(&bytes), by_bytes(&bytes), "{bytes:?}");
                    bytes.fill(value);
                    assert_eq!(control_and_high(&bytes), by_bytes(&bytes), "{bytes:?}");
                }
            }
        }
    }
}
