//! A SQLite journal's batch as stored (format version 3): the records' lines compressed as one
//! LZ4 block after their length (4 bytes, little-endian) — the layout of `lz4_flex`'s
//! `*_size_prepended` and of the `lz4` package's `lz4.block` defaults. The lines are mostly
//! the same JSON-RPC boilerplate, so a batch shrinks several times (12-16x for the benchmark's
//! chunks, ~7x for the recorded interop transcripts) and SQLite writes that much less twice
//! (the WAL, then the checkpoint): compressing costs less than the bytes it saves.

/// An LZ4 block expands at most ~255 times: a larger stated length is corruption, and is
/// refused before anything that large is allocated.
pub const MAX_RATIO: usize = 255;

/// `text` packed into the front of `out`; returns the packed length. `out` is only ever
/// grown (zeroing 512 KiB for each batch cost a tenth of the writer's time), and its memory is
/// kept from batch to batch.
pub fn pack_into(text: &[u8], out: &mut Vec<u8>) -> Result<usize, String> {
    let length = u32::try_from(text.len()).map_err(|_| "a batch over 4 GiB".to_owned())?;
    let bound = 4 + lz4_flex::block::get_maximum_output_size(text.len());
    if out.len() < bound {
        out.resize(bound, 0);
    }
    out[..4].copy_from_slice(&length.to_le_bytes());
    let packed = lz4_flex::block::compress_into(text, &mut out[4..])
        .map_err(|error| format!("cannot compress a batch: {error}"))?;
    Ok(4 + packed)
}

/// The lines of a packed batch.
pub fn unpack(packed: &[u8]) -> Result<Vec<u8>, String> {
    let Some((head, block)) = packed.split_first_chunk::<4>() else {
        return Err("shorter than its length".to_owned());
    };
    let length = u32::from_le_bytes(*head) as usize;
    if length > block.len().saturating_mul(MAX_RATIO) {
        return Err(format!("says {length} bytes, more than its block can hold"));
    }
    let mut text = vec![0; length];
    let found = lz4_flex::block::decompress_into(block, &mut text).map_err(|e| e.to_string())?;
    if found != length {
        return Err(format!("holds {found} bytes, not the {length} it says"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let line = br#"{"n":1,"k":"update","e":1,"s":1,"t":5,"i":"s","m":{"a":"bcdefgh"}}"#;
        let text: Vec<u8> = line
            .iter()
            .chain(b"\n")
            .copied()
            .cycle()
            .take(70 * 500)
            .collect();
        let mut out = Vec::new();
        let length = pack_into(&text, &mut out).unwrap();
        assert!(length * 10 < text.len());
        assert_eq!(unpack(&out[..length]).unwrap(), text);
        let length = pack_into(b"", &mut out).unwrap(); // reused: a longer buffer
        assert_eq!(unpack(&out[..length]).unwrap(), b"");
        let length = pack_into(&text, &mut out).unwrap();
        let packed = &out[..length];
        assert!(unpack(&packed[..packed.len() - 3]).is_err());
        assert!(unpack(&packed[..3]).is_err());
        let mut huge = packed.to_vec();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(unpack(&huge).is_err());
        let mut longer = packed.to_vec();
        longer[..4].copy_from_slice(&(text.len() as u32 + 1).to_le_bytes());
        assert!(unpack(&longer).is_err());
    }
}
