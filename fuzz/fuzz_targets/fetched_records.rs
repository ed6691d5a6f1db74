#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferrokafka_net::fuzzing::fetched_records(data));
