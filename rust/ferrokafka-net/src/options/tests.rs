use std::collections::HashSet;
use std::sync::Arc;

use super::*;
use crate::security::TokenProvider;
use crate::Error;

#[test]
fn every_spelling_names_one_option() {
    let mut seen = HashSet::new();
    for o in OPTIONS {
        assert!(!o.java.is_empty(), "{} has no dotted name", o.name);
        assert!(!o.doc.is_empty(), "{} has no doc", o.name);
        assert_ne!(o.clients, 0, "{} is taken by no client", o.name);
        let names: HashSet<&str> = o.names().collect();
        for n in names {
            assert!(seen.insert(n), "{n:?} names two options");
        }
    }
}

#[test]
fn defaults_pass_their_own_checks() {
    for o in OPTIONS {
        for c in o.clients() {
            let Some(v) = o.default.value() else { continue };
            let raw = match v {
                Value::Null => Raw::Null,
                Value::Int(i) => Raw::Int(i),
                Value::Bool(b) => Raw::Bool(b),
                Value::Str(s) => Raw::Str(s),
                Value::List(l) => Raw::List(l.into_iter().map(Raw::Str).collect()),
                Value::Float(f) => Raw::Float(f),
                Value::Object => Raw::Callable,
            };
            assert!(
                o.constraint(Some(c)).coerce(&raw).is_ok(),
                "{} default",
                o.name
            );
        }
    }
}

#[test]
fn coercion_follows_the_java_and_librdkafka_spellings() {
    let c = |k| lookup(k).unwrap().constraint(Some(Client::Producer));
    assert_eq!(
        c("acks").coerce(&Raw::Int(-1)),
        Ok(Value::Str("all".into()))
    );
    assert_eq!(
        c("acks").coerce(&Raw::Str(" 1 ".into())),
        Ok(Value::Str("1".into()))
    );
    assert!(c("acks").coerce(&Raw::Bool(true)).is_err());
    assert_eq!(
        c("linger.ms").coerce(&Raw::Str(" 10".into())),
        Ok(Value::Int(10))
    );
    assert_eq!(c("linger.ms").coerce(&Raw::Float(3.0)), Ok(Value::Int(3)));
    assert!(c("linger.ms").coerce(&Raw::Float(1.5)).is_err());
    assert!(c("linger.ms").coerce(&Raw::Bool(true)).is_err());
    assert!(c("linger.ms").coerce(&Raw::Int(-1)).is_err());
    assert!(c("retries").coerce(&Raw::BigInt).is_err());
    assert_eq!(
        c("enable.idempotence").coerce(&Raw::Str("FALSE".into())),
        Ok(Value::Bool(false))
    );
    assert_eq!(
        c("security.protocol").coerce(&Raw::Str("sasl_ssl".into())),
        Ok(Value::Str("SASL_SSL".into()))
    );
    assert_eq!(
        c("ssl.endpoint.identification.algorithm").coerce(&Raw::Str("none".into())),
        Ok(Value::Bool(false))
    );
    assert_eq!(
        c("bootstrap.servers").coerce(&Raw::Str("a:1, b:2,".into())),
        Ok(Value::List(vec!["a:1".into(), "b:2".into()]))
    );
    for bad in ["a", "a:0", "a:x", ":1", ""] {
        assert!(
            c("bootstrap.servers")
                .coerce(&Raw::Str(bad.into()))
                .is_err(),
            "{bad}"
        );
    }
    assert_eq!(c("retries").accepted(), "an integer in [0, 2147483647]");
    assert_eq!(c("acks").accepted(), "one of 'all', '0', '1'");
    assert_eq!(c("transactional_id").accepted(), "a string or None");
}

#[test]
fn low_level_metadata_classes_take_short_idle_times() {
    let spec = lookup("metadata.max.idle.ms").unwrap();
    assert!(spec
        .constraint(Some(Client::Producer))
        .coerce(&Raw::Int(1000))
        .is_err());
    assert!(spec
        .constraint(Some(Client::ProducerMetadata))
        .coerce(&Raw::Int(1000))
        .is_ok());
    assert!(!spec.takes(Client::Metadata));
}

#[test]
fn unknown_and_invalid_options_name_the_key() {
    let e = Resolved::from_pairs(
        Client::NetworkClient,
        [
            ("bootstrap.servers", Raw::Str("h:1".into())),
            ("retry.backoff.ms", Raw::Int(1)),
        ],
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::Config { ref key, ref detail } if key == "retry.backoff.ms" && detail.contains("unknown NetworkClient option"))
    );
    let e = Resolved::from_pairs(
        Client::Producer,
        [
            ("bootstrap.servers", Raw::Str("h:1".into())),
            ("linger.ms", Raw::Int(-1)),
        ],
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::Config { ref key, ref detail } if key == "linger.ms" && detail == "expected an integer >= 0")
    );
    let e = Resolved::from_pairs(Client::Consumer, []).unwrap_err();
    assert!(matches!(e, Error::Config { ref key, .. } if key == "bootstrap_servers"));
}

/// A value other than the default that passes the option's checks.
fn other_value(o: &Spec, c: Client) -> Raw {
    let con = o.constraint(Some(c));
    if !o.choices.is_empty() {
        let default: Vec<&str> = match o.default {
            Default::Str(s) => vec![s],
            Default::List(l) => l.to_vec(),
            _ => vec![],
        };
        let pick = o.choices.iter().find(|x| !default.contains(x)).unwrap();
        return match o.kind {
            Kind::StrList => Raw::List(vec![Raw::Str(pick.to_string())]),
            _ => Raw::Str(pick.to_string()),
        };
    }
    match (o.kind, o.default) {
        (Kind::Int, Default::Int(d)) => Raw::Int(if con.max.is_some_and(|m| d + 1 > m) {
            d - 1
        } else {
            d + 1
        }),
        (Kind::Bool | Kind::CheckHostname, Default::Bool(b)) => Raw::Bool(!b),
        (Kind::Servers, _) => Raw::Str("elsewhere:1".into()),
        (Kind::Callable, _) => Raw::Callable,
        (_, Default::Str(s)) => Raw::Str(format!("{s}-other")),
        _ => Raw::Str("other".into()),
    }
}

/// A value meeting a `needs` entry: the first listed, or any for `*`.
fn needed_value(values: &str) -> String {
    match values.split('|').next() {
        Some("*") | None => "some-group".into(),
        Some(v) => v.into(),
    }
}

fn effective(c: Client, pairs: &[(&str, Raw)]) -> Vec<(&'static str, String)> {
    let mut given: Vec<(&str, Raw)> = Vec::new();
    if lookup("bootstrap_servers").unwrap().takes(c) {
        given.push(("bootstrap_servers", Raw::Str("h:1".into())));
    }
    given.extend(pairs.iter().cloned());
    // A share consumer always names its group.
    if c == Client::ShareConsumer && !given.iter().any(|(k, _)| *k == "group_id") {
        given.push(("group_id", Raw::Str("sg".into())));
    }
    let r = Resolved::from_pairs(c, given).unwrap_or_else(|e| panic!("{c:?} {pairs:?}: {e}"));
    let provider = pairs.iter().any(|(_, v)| *v == Raw::Callable).then(|| {
        let p: TokenProvider = Arc::new(|| Ok("token".to_string()));
        p
    });
    build(&r, provider)
        .unwrap_or_else(|e| panic!("{c:?} {pairs:?}: {e}"))
        .fields()
}

/// No option is accepted and ignored: for every client and every option it
/// takes that is marked as reaching the core, a non-default value changes
/// each field the table says it fills (and the client fills at least one).
#[test]
fn every_core_option_reaches_its_fields() {
    let mut checked = 0;
    for c in Client::ALL {
        for o in OPTIONS.iter().filter(|o| o.takes(c)) {
            let Effect::Core(fields) = o.effect else {
                continue;
            };
            let mut base: Vec<(&str, Raw)> = o
                .needs
                .iter()
                .map(|(k, v)| (*k, Raw::Str(needed_value(v))))
                .collect();
            // Rules `_config.py` applies (idempotence gives way) are not applied here.
            if c == Client::Producer
                && ["acks", "max_in_flight_requests_per_connection"].contains(&o.name)
            {
                base.push(("enable_idempotence", Raw::Bool(false)));
            }
            let before = effective(c, &base);
            let mut changed = base.clone();
            changed.push((o.name, other_value(o, c)));
            let after = effective(c, &changed);
            let mut hit = 0;
            for f in fields {
                let Some((_, a)) = after.iter().find(|(n, _)| n == f) else {
                    continue;
                };
                let b = before.iter().find(|(n, _)| n == f).map(|(_, v)| v.as_str());
                assert_ne!(b, Some(a.as_str()), "{c:?}: {} did not change {f}", o.name);
                hit += 1;
            }
            assert!(hit > 0, "{c:?}: {} fills none of {fields:?}", o.name);
            checked += 1;
        }
    }
    assert!(checked > 80, "{checked}");
}
