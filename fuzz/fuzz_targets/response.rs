#![no_main]
//! Every response decoder: the input picks the API and version (see
//! `ferrokafka_protocol::fuzzing::response_selector`); `FERROKAFKA_FUZZ_API`
//! (a key number) pins the API so each decoder gets its own run and count.
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn pinned() -> Option<i16> {
    static P: OnceLock<Option<i16>> = OnceLock::new();
    *P.get_or_init(|| std::env::var("FERROKAFKA_FUZZ_API").ok().and_then(|v| v.parse().ok()))
}

fuzz_target!(|data: &[u8]| ferrokafka_protocol::fuzzing::response(pinned(), data));
