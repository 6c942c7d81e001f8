//! A SQLite journal's stored batch is hostile input when read back (a crafted or damaged
//! database): unpacking refuses, without panicking and before allocating more than 255 times
//! the row, anything that is not one whole packed batch.

use acp_journal::{pack_into, unpack, MAX_RATIO};
use proptest::prelude::*;

/// A packed row: the stated length (little-endian), then the block.
fn row(stated: u32, block: &[u8]) -> Vec<u8> {
    [stated.to_le_bytes().as_slice(), block].concat()
}

#[test]
fn a_stated_length_past_what_the_block_can_hold_is_refused_before_allocating() {
    let refused = unpack(&row(u32::MAX, &[0x10, b'a'])).unwrap_err();
    assert_eq!(
        refused,
        "says 4294967295 bytes, more than its block can hold"
    );
    let block = [0x10, b'a'];
    let most = u32::try_from(block.len() * MAX_RATIO).unwrap();
    assert!(unpack(&row(most + 1, &block))
        .unwrap_err()
        .contains("more than"));
    // At the bound it is decoded (and found not to hold that much).
    let short = unpack(&row(most, &block)).unwrap_err();
    assert!(!short.contains("more than"), "{short}");
    assert_eq!(unpack(&[1, 0, 0]).unwrap_err(), "shorter than its length");
}

#[test]
fn crafted_blocks_are_refused_not_followed() {
    let cases: [(&str, u32, &[u8]); 5] = [
        // A match at offset 0 (no such byte).
        ("offset zero", 8, &[0x10, b'a', 0x00, 0x00, 0x00]),
        // A match reaching before the output's start.
        (
            "offset before the start",
            8,
            &[0x10, b'a', 0x05, 0x00, 0x00],
        ),
        // A literal run longer than the block (255 + 255 + 16 + 15 bytes said, 1 there).
        (
            "literals past the block",
            600,
            &[0xf0, 0xff, 0xff, 0x10, b'a'],
        ),
        // A match writing past the stated length (1 + 4 + 15 + 255 bytes into 10).
        (
            "output past its length",
            10,
            &[0x1f, b'a', 0x01, 0x00, 0xff, 0x00],
        ),
        // A block ending inside a match's offset.
        ("a cut offset", 8, &[0x10, b'a', 0x01]),
    ];
    for (what, stated, block) in cases {
        assert!(unpack(&row(stated, block)).is_err(), "{what} was accepted");
    }
    // A whole block holding less than it says.
    let mut out = Vec::new();
    let length = pack_into(b"hello", &mut out).unwrap();
    let mut lying = out[..length].to_vec();
    lying[..4].copy_from_slice(&6u32.to_le_bytes());
    assert_eq!(
        unpack(&lying).unwrap_err(),
        "holds 5 bytes, not the 6 it says"
    );
}

#[test]
fn the_most_compressible_batch_the_writer_can_make_unpacks() {
    // A record of one repeated byte is LZ4's best case (~255x): the bound must not refuse
    // what the writer itself stores.
    for text in [
        vec![b'a'; 1 << 20],
        vec![0; 3 << 20],
        b"{}\n".repeat(100_000),
    ] {
        let mut out = Vec::new();
        let length = pack_into(&text, &mut out).unwrap();
        assert_eq!(unpack(&out[..length]).unwrap(), text);
    }
}

proptest! {
    #[test]
    fn random_rows_never_panic_and_stay_bounded(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(text) = unpack(&bytes) {
            prop_assert!(text.len() <= (bytes.len() - 4) * MAX_RATIO);
            prop_assert_eq!(text.len() as u32, u32::from_le_bytes(bytes[..4].try_into().unwrap()));
        }
    }

    #[test]
    fn damaged_batches_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let text = br#"{"n":1,"k":"update","e":1,"s":1,"t":5,"i":"s","m":{"a":"bcdefgh"}}
"#.repeat(40);
        let mut out = Vec::new();
        let length = pack_into(&text, &mut out).unwrap();
        let mut packed = out[..length].to_vec();
        for (at, byte) in flips {
            let at = at % packed.len();
            packed[at] ^= byte | 1;
        }
        if let Ok(found) = unpack(&packed) {
            prop_assert_eq!(found.len() as u32, u32::from_le_bytes(packed[..4].try_into().unwrap()));
        }
    }
}
