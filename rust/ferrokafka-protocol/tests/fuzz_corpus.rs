//! Replays the fuzz corpus kept in the repository through the fuzz targets'
//! entry points, on the stable toolchain, in every `cargo test`:
//! `fuzz/seeds/<target>/` (real broker answers and our encoders' output) and
//! `fuzz/regressions/<target>/` (inputs that once crashed a target; each
//! file's name says what it found). A regression reappearing fails here
//! without anyone running the fuzzer.
use std::fs;
use std::path::PathBuf;

use ferrokafka_protocol::fuzzing;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut out = Vec::new();
    for kind in ["seeds", "regressions"] {
        let Ok(dir) = fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        for e in dir {
            let p = e.unwrap().path();
            out.push((p.display().to_string(), fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

fn replay(target: &str, min_files: usize, f: fn(&[u8])) {
    let files = corpus(target);
    assert!(
        files.len() >= min_files,
        "{target}: only {} corpus files",
        files.len()
    );
    for (name, data) in files {
        // A panic names the file; the whole input is in the repository.
        eprintln!("{name}");
        f(&data);
    }
}

#[test]
fn response_corpus() {
    replay("response", 100, |d| fuzzing::response(None, d));
}

#[test]
fn record_batches_corpus() {
    replay("record_batches", 20, fuzzing::record_batches);
}

#[test]
fn frames_corpus() {
    replay("frames", 3, fuzzing::frames);
}

#[test]
fn decompression_corpus() {
    replay("decompression", 4, fuzzing::decompression);
}

#[test]
fn sasl_scram_corpus() {
    replay("sasl_scram", 2, fuzzing::sasl_scram);
}

/// The recorded answers are real: most must decode (a selector bug that
/// decoded everything at the wrong version would pass the replay above).
#[test]
fn recorded_answers_decode() {
    let files = corpus("response");
    let real: Vec<_> = files
        .iter()
        .filter(|(n, _)| !n.ends_with("zeros") && n.contains("/seeds/"))
        .collect();
    assert!(real.len() >= 40, "{}", real.len());
    let mut bad = Vec::new();
    for (name, data) in &real {
        let (key, version, frame) = fuzzing::response_selector(None, data).unwrap();
        if ferrokafka_protocol::frame::decode_response(
            key,
            version,
            bytes::Bytes::copy_from_slice(frame),
        )
        .is_err()
        {
            bad.push(name.clone());
        }
    }
    assert!(
        bad.is_empty(),
        "recorded answers that do not decode: {bad:?}"
    );
}
