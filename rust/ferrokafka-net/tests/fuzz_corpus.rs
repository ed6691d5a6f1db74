//! Replays `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/` through
//! the network crate's fuzz entry points on stable (see the protocol crate's
//! `tests/fuzz_corpus.rs`).
use std::fs;
use std::path::PathBuf;

use ferrokafka_net::fuzzing;

fn replay(target: &str, min_files: usize, f: fn(&[u8])) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files = Vec::new();
    for kind in ["seeds", "regressions"] {
        let Ok(dir) = fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        files.extend(dir.map(|e| e.unwrap().path()));
    }
    files.sort();
    assert!(
        files.len() >= min_files,
        "{target}: only {} corpus files",
        files.len()
    );
    for p in files {
        eprintln!("{}", p.display());
        f(&fs::read(&p).unwrap());
    }
}

#[test]
fn fetched_records_corpus() {
    replay("fetched_records", 10, fuzzing::fetched_records);
}

#[test]
fn metadata_update_corpus() {
    replay("metadata_update", 4, fuzzing::metadata_update);
}

#[test]
fn group_assignment_corpus() {
    replay("group_assignment", 4, fuzzing::group_assignment);
}
