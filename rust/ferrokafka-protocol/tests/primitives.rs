//! Property round trips and hostile input for every wire primitive.

use ferrokafka_protocol::primitives::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fixed_width(a in any::<i8>(), b in any::<i16>(), c in any::<i32>(), d in any::<i64>(), e in any::<u32>(), f in any::<f64>()) {
        use bytes::BufMut;
        let mut buf = Vec::new();
        buf.put_i8(a); buf.put_i16(b); buf.put_i32(c); buf.put_i64(d); buf.put_u32(e); buf.put_f64(f);
        let mut r = Reader::new(&buf);
        prop_assert_eq!(r.i8().unwrap(), a);
        prop_assert_eq!(r.i16().unwrap(), b);
        prop_assert_eq!(r.i32().unwrap(), c);
        prop_assert_eq!(r.i64().unwrap(), d);
        prop_assert_eq!(r.u32().unwrap(), e);
        prop_assert_eq!(r.f64().unwrap().to_bits(), f.to_bits());
        prop_assert!(r.is_empty());
    }

    #[test]
    fn varints(a in any::<i32>(), b in any::<i64>(), c in any::<u32>(), d in any::<u64>()) {
        let mut buf = Vec::new();
        put_varint(&mut buf, a);
        prop_assert_eq!(buf.len(), varint_len(a));
        put_varlong(&mut buf, b);
        prop_assert_eq!(buf.len(), varint_len(a) + varlong_len(b));
        put_uvarint(&mut buf, c);
        put_uvarlong(&mut buf, d);
        let mut r = Reader::new(&buf);
        prop_assert_eq!(r.varint().unwrap(), a);
        prop_assert_eq!(r.varlong().unwrap(), b);
        prop_assert_eq!(r.uvarint().unwrap(), c);
        prop_assert_eq!(r.uvarlong().unwrap(), d);
        prop_assert!(r.is_empty());
    }

    #[test]
    fn strings_and_bytes(
        s in proptest::option::of(".{0,40}"),
        cs in proptest::option::of(".{0,40}"),
        b in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
        cb in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
        vb in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
    ) {
        let mut buf = Vec::new();
        put_nullable_string(&mut buf, s.as_deref()).unwrap();
        put_compact_nullable_string(&mut buf, cs.as_deref()).unwrap();
        put_nullable_bytes(&mut buf, b.as_deref()).unwrap();
        put_compact_nullable_bytes(&mut buf, cb.as_deref()).unwrap();
        put_varint_bytes(&mut buf, vb.as_deref()).unwrap();
        put_string(&mut buf, "x").unwrap();
        put_compact_string(&mut buf, "yz").unwrap();
        put_bytes(&mut buf, b"b").unwrap();
        put_compact_bytes(&mut buf, b"cb").unwrap();
        let mut r = Reader::new(&buf);
        prop_assert_eq!(r.nullable_string().unwrap(), s.as_deref());
        prop_assert_eq!(r.compact_nullable_string().unwrap(), cs.as_deref());
        prop_assert_eq!(r.nullable_bytes().unwrap(), b.as_deref());
        prop_assert_eq!(r.compact_nullable_bytes().unwrap(), cb.as_deref());
        prop_assert_eq!(r.varint_bytes("v").unwrap(), vb.as_deref());
        prop_assert_eq!(r.string().unwrap(), "x");
        prop_assert_eq!(r.compact_string().unwrap(), "yz");
        prop_assert_eq!(r.bytes().unwrap(), b"b");
        prop_assert_eq!(r.compact_bytes().unwrap(), b"cb");
        prop_assert!(r.is_empty());
    }

    #[test]
    fn arrays_uuid_tags(
        n in proptest::option::of(0usize..50),
        cn in proptest::option::of(0usize..50),
        uuid in any::<[u8; 16]>(),
        tags in proptest::collection::btree_map(any::<u32>(), proptest::collection::vec(any::<u8>(), 0..20), 0..5),
    ) {
        let mut buf = Vec::new();
        put_nullable_array_len(&mut buf, n).unwrap();
        put_compact_nullable_array_len(&mut buf, cn).unwrap();
        put_uuid(&mut buf, &uuid);
        let fields: Vec<(u32, &[u8])> = tags.iter().map(|(k, v)| (*k, &v[..])).collect();
        put_tagged_fields(&mut buf, &fields).unwrap();
        // Pad so the array counts are plausible against the bytes left.
        buf.extend(std::iter::repeat_n(0u8, 100));
        let mut r = Reader::new(&buf);
        prop_assert_eq!(r.nullable_array_len().unwrap(), n);
        prop_assert_eq!(r.compact_nullable_array_len().unwrap(), cn);
        prop_assert_eq!(r.uuid().unwrap(), uuid);
        let mut seen = Vec::new();
        r.tagged_fields(|t, d| { seen.push((t, d.to_vec())); Ok(()) }).unwrap();
        let want: Vec<(u32, Vec<u8>)> = tags.into_iter().collect();
        prop_assert_eq!(seen, want);
    }

    /// Every reader on arbitrary bytes: a value or an error, never a panic,
    /// and never a count larger than the bytes that follow.
    #[test]
    fn hostile_bytes(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        type Op = fn(&mut Reader) -> bool;
        let ops: &[Op] = &[
            |r| r.i8().is_ok(), |r| r.i16().is_ok(), |r| r.i32().is_ok(), |r| r.i64().is_ok(),
            |r| r.varint().is_ok(), |r| r.varlong().is_ok(), |r| r.uvarint().is_ok(), |r| r.uvarlong().is_ok(),
            |r| r.string().is_ok(), |r| r.nullable_string().is_ok(),
            |r| r.compact_string().is_ok(), |r| r.compact_nullable_string().is_ok(),
            |r| r.bytes().is_ok(), |r| r.nullable_bytes().is_ok(),
            |r| r.compact_bytes().is_ok(), |r| r.compact_nullable_bytes().is_ok(),
            |r| r.varint_bytes("v").is_ok(), |r| r.uuid().is_ok(), |r| r.skip_tagged_fields().is_ok(),
            |r| { let before = r.remaining(); match r.array_len() { Ok(n) => n <= before, Err(_) => true } },
            |r| { let before = r.remaining(); match r.compact_array_len() { Ok(n) => n <= before, Err(_) => true } },
        ];
        for op in ops {
            let mut r = Reader::new(&data);
            // Run the op repeatedly so every position of the input is tried.
            for _ in 0..8 {
                let _ = op(&mut r);
            }
        }
        for op in &ops[19..] {
            let mut r = Reader::new(&data);
            prop_assert!(op(&mut r));
        }
    }
}

#[test]
fn huge_lengths_are_refused_without_allocation() {
    // i32::MAX length with 4 bytes behind it.
    let data = [0x7f, 0xff, 0xff, 0xff, 1, 2, 3, 4];
    assert!(Reader::new(&data).bytes().is_err());
    assert!(Reader::new(&data).array_len().is_err());
    // compact length u32::MAX - 1 as a 5-byte uvarint.
    let data = [0xfe, 0xff, 0xff, 0xff, 0x0f, 0];
    assert!(Reader::new(&data).compact_bytes().is_err());
    assert!(Reader::new(&data).compact_array_len().is_err());
    // Non-UTF-8 strings are errors.
    assert!(Reader::new(&[0, 2, 0xff, 0xfe]).string().is_err());
    // Tags must increase.
    assert!(Reader::new(&[2, 5, 0, 3, 0]).skip_tagged_fields().is_err());
    assert!(put_tagged_fields(&mut Vec::new(), &[(5, &[][..]), (3, &[][..])]).is_err());
}
