#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferrokafka_protocol::fuzzing::frames(data));
