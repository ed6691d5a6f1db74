//! The rows of the option table (see `options.rs` for what each column means).
//! `docs/options.md` is generated from these rows (`python
//! scripts/gen-options-doc.py`); a test fails when it is out of date.

use super::{Client, Default, Effect, Kind, Spec};
use crate::producer::partitioner::Partitioner;

const P: u8 = Client::Producer.bit();
const C: u8 = Client::Consumer.bit();
const A: u8 = Client::Admin.bit();
const N: u8 = Client::NetworkClient.bit();
const M: u8 = Client::Metadata.bit() | Client::ProducerMetadata.bit();
const PM: u8 = Client::ProducerMetadata.bit();
const S: u8 = Client::ShareConsumer.bit();
/// The three high-level clients.
const PCA: u8 = P | C | A;

const INT_MAX: i64 = i32::MAX as i64;

/// The SASL settings only matter with a SASL security protocol, the TLS ones with TLS.
const SASL: &[(&str, &str)] = &[("security_protocol", "SASL_PLAINTEXT|SASL_SSL")];
const TLS: &[(&str, &str)] = &[("security_protocol", "SSL|SASL_SSL")];
/// Group settings only matter in a group.
const GROUP: &[(&str, &str)] = &[("group_id", "*")];

const fn opt(name: &'static str, kind: Kind, default: Default, clients: u8) -> Spec {
    Spec {
        name,
        java: "",
        aliases: &[],
        kind,
        default,
        min: None,
        max: None,
        choices: &[],
        nullable: matches!(default, Default::Null),
        clients,
        low_level_min: None,
        needs: &[],
        effect: Effect::Core(&[]),
        doc: "",
    }
}

const fn int(name: &'static str, default: i64, min: i64, clients: u8) -> Spec {
    Spec {
        min: Some(min),
        ..opt(name, Kind::Int, Default::Int(default), clients)
    }
}

impl Spec {
    const fn java(self, java: &'static str) -> Spec {
        Spec { java, ..self }
    }
    const fn aliases(self, aliases: &'static [&'static str]) -> Spec {
        Spec { aliases, ..self }
    }
    const fn max(self, max: i64) -> Spec {
        Spec {
            max: Some(max),
            ..self
        }
    }
    const fn choices(self, choices: &'static [&'static str]) -> Spec {
        Spec { choices, ..self }
    }
    const fn low_level_min(self, min: i64) -> Spec {
        Spec {
            low_level_min: Some(min),
            ..self
        }
    }
    const fn needs(self, needs: &'static [(&'static str, &'static str)]) -> Spec {
        Spec { needs, ..self }
    }
    const fn core(self, fields: &'static [&'static str], doc: &'static str) -> Spec {
        Spec {
            effect: Effect::Core(fields),
            doc,
            ..self
        }
    }
    const fn python(self, place: &'static str, doc: &'static str) -> Spec {
        Spec {
            effect: Effect::Python(place),
            doc,
            ..self
        }
    }
    // No option is refused today (transactional_id was, until transactions
    // landed); the mechanism stays for the next one, with _config.py's rule.
    #[allow(dead_code)]
    const fn refused(self, reason: &'static str, doc: &'static str) -> Spec {
        Spec {
            effect: Effect::Refused(reason),
            doc,
            ..self
        }
    }
}

/// Every option.
pub static OPTIONS: &[Spec] = &[
    // --- every client ------------------------------------------------------------------
    opt("bootstrap_servers", Kind::Servers, Default::Required, PCA | S | N)
        .java("bootstrap.servers")
        .aliases(&["metadata.broker.list"])
        .core(&["bootstrap"], "Brokers to ask for the first metadata (docs/semantics.md §1.2)."),
    opt("client_id", Kind::Str, Default::Str("ferrokafka"), PCA | S | N)
        .java("client.id")
        .core(&["ClientConfig.client_id"], "Sent in every request header; brokers log and quota by it."),
    opt("enable_metrics_push", Kind::Bool, Default::Bool(true), PCA)
        .java("enable.metrics.push")
        .core(
            &["ClientConfig.enable_metrics_push"],
            "KIP-714: push this client's metrics to brokers that subscribe to them (docs/semantics.md §10); on by default, as in Java.",
        ),
    int("request_timeout_ms", 30_000, 1, PCA | S | N)
        .java("request.timeout.ms")
        .max(INT_MAX)
        .core(
            &[
                "ClientConfig.request_timeout_ms",
                "UpdaterConfig.request_timeout_ms",
                "ProducerConfig.request_timeout_ms",
                "ConsumerConfig.request_timeout_ms",
                "ShareConfig.request_timeout_ms",
                "AdminConfig.request_timeout_ms",
            ],
            "How long a request may wait for its answer before it fails and its connection is closed.",
        ),
    int("reconnect_backoff_ms", 50, 0, PCA | S | N)
        .java("reconnect.backoff.ms")
        .core(&["ClientConfig.reconnect_backoff_ms"], "Wait before reconnecting to a broker after a failed connection."),
    int("reconnect_backoff_max_ms", 1000, 0, PCA | S | N)
        .java("reconnect.backoff.max.ms")
        .core(
            &["ClientConfig.reconnect_backoff_max_ms"],
            "Cap of the exponential reconnect backoff (equal to reconnect_backoff_ms when only that is set).",
        ),
    int("socket_connection_setup_timeout_ms", 10_000, 1, PCA | S | N)
        .java("socket.connection.setup.timeout.ms")
        .core(&["ClientConfig.socket_connection_setup_timeout_ms"], "How long a connect (TCP, TLS, SASL) may take."),
    int("connections_max_idle_ms", 540_000, -1, PCA | S | N)
        .java("connections.max.idle.ms")
        .core(&["ClientConfig.connections_max_idle_ms"], "Close connections idle this long; -1 never."),
    int("max_in_flight_requests_per_connection", 5, 1, PCA | S | N)
        .java("max.in.flight.requests.per.connection")
        .aliases(&["max.in.flight"])
        .core(&["ClientConfig.max_in_flight_requests_per_connection"], "Requests sent to one broker without an answer yet."),
    int("max_response_size", 100 * 1024 * 1024, 1024, PCA | S | N)
        .java("max.response.size")
        .core(&["ClientConfig.max_response_size"], "Largest answer accepted; a larger one fails its request."),
    int("send_buffer_bytes", 1024 * 1024, -1, PCA | S | N)
        .java("send.buffer.bytes")
        .aliases(&["socket.send.buffer.bytes"])
        .max(INT_MAX)
        .core(&["ClientConfig.send_buffer_bytes"], "SO_SNDBUF of each connection, and how much of a request counts as written once it is in ours (docs/semantics.md §4.7); -1 leaves it to the OS (librdkafka's default), whose autotuning grows it up to tcp_wmem's maximum. The default, 1 MiB (Java's is 131072), holds a whole Produce request of a default batch; against -1 the ceiling run's send_batch took 7-12% less CPU a record (medians of four alternating comparisons; issue 17, session 32). A fixed buffer bounds a connection to about twice it per round trip: raise it (or set -1) for long-haul links."),
    int("receive_buffer_bytes", -1, -1, PCA | S | N)
        .java("receive.buffer.bytes")
        .aliases(&["socket.receive.buffer.bytes"])
        .max(INT_MAX)
        .core(&["ClientConfig.receive_buffer_bytes"], "SO_RCVBUF of each connection; -1 (the default, as librdkafka's; Java's is 65536) leaves it to the OS, whose autotuning grows the window for large fetches."),
    opt("security_protocol", Kind::Upper, Default::Str("PLAINTEXT"), PCA | S | N)
        .java("security.protocol")
        .choices(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
        .core(&["Security.protocol"], "Transport security (any case)."),
    opt("sasl_mechanism", Kind::Str, Default::Str("PLAIN"), PCA | S | N)
        .java("sasl.mechanism")
        .aliases(&["sasl.mechanisms"])
        .choices(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
        .needs(SASL)
        .core(&["SaslOptions.mechanism"], "SASL mechanism."),
    opt("sasl_username", Kind::Str, Default::Null, PCA | S | N)
        .java("sasl.username")
        .needs(SASL)
        .core(&["SaslOptions.username"], "SASL user (PLAIN, SCRAM)."),
    opt("sasl_password", Kind::Secret, Default::Null, PCA | S | N)
        .java("sasl.password")
        .needs(SASL)
        .core(&["SaslOptions.password"], "SASL password (PLAIN, SCRAM); never shown in reprs or messages."),
    opt("sasl_oauth_token_provider", Kind::Callable, Default::Null, PCA | S | N)
        .java("sasl.oauth.token.provider")
        .aliases(&["oauth_cb"])
        .needs(&[("security_protocol", "SASL_PLAINTEXT|SASL_SSL"), ("sasl_mechanism", "OAUTHBEARER")])
        .core(&["SaslOptions.token_provider"], "Callable returning an OAUTHBEARER token, called before each authentication."),
    opt("ssl_cafile", Kind::Str, Default::Null, PCA | S | N)
        .java("ssl.ca.location")
        .aliases(&["ssl.cafile"])
        .needs(TLS)
        .core(&["TlsOptions.ca_file"], "CA bundle (PEM); None the system trust store."),
    opt("ssl_certfile", Kind::Str, Default::Null, PCA | S | N)
        .java("ssl.certificate.location")
        .aliases(&["ssl.certfile"])
        .needs(TLS)
        .core(&["TlsOptions.cert_file"], "Client certificate chain (PEM), for mutual TLS."),
    opt("ssl_keyfile", Kind::Str, Default::Null, PCA | S | N)
        .java("ssl.key.location")
        .aliases(&["ssl.keyfile"])
        .needs(TLS)
        .core(&["TlsOptions.key_file"], "Client private key (PEM), for mutual TLS."),
    opt("ssl_check_hostname", Kind::CheckHostname, Default::Bool(true), PCA | S | N)
        .java("ssl.check.hostname")
        .aliases(&["ssl.endpoint.identification.algorithm"])
        .needs(TLS)
        .core(&["TlsOptions.check_hostname"], "Check that the broker's certificate names the host connected to."),
    // --- clients that keep metadata ----------------------------------------------------
    int("retry_backoff_ms", 100, 0, PCA | S | M)
        .java("retry.backoff.ms")
        .aliases(&["refresh_backoff_ms"])
        .core(
            &[
                "MetadataConfig.refresh_backoff_ms",
                "ProducerConfig.retry_backoff_ms",
                "ConsumerConfig.retry_backoff_ms",
                "ShareConfig.retry_backoff_ms",
                "AdminConfig.retry_backoff_ms",
            ],
            "Wait before retrying a failed request, and between two metadata refreshes (docs/semantics.md §3).",
        ),
    int("retry_backoff_max_ms", 1000, 0, PCA | S | M)
        .java("retry.backoff.max.ms")
        .aliases(&["refresh_backoff_max_ms"])
        .core(
            &["MetadataConfig.refresh_backoff_max_ms", "ProducerConfig.retry_backoff_max_ms"],
            "Cap of the exponential retry backoff.",
        ),
    int("metadata_max_age_ms", 300_000, 0, PCA | S | M)
        .java("metadata.max.age.ms")
        .aliases(&["metadata_expire_ms"])
        .core(&["MetadataConfig.metadata_expire_ms"], "Refresh metadata at least this often (docs/semantics.md §1.3)."),
    // --- producer ----------------------------------------------------------------------
    opt("acks", Kind::Acks, Default::Str("all"), P)
        .java("acks")
        .choices(&["all", "0", "1"])
        .core(&["ProducerConfig.acks"], "Replicas that must have a record before it counts as sent (-1 = all)."),
    int("linger_ms", 5, 0, P)
        .java("linger.ms")
        .core(&["ProducerConfig.linger_ms"], "Wait this long for more records before sending a batch that is not full."),
    // Not Java's 16384: per-request cost dominates `send()` at 16 KiB
    // (docs/benchmarks.md); memory is charged as a batch grows, not up front.
    int("batch_size", 1_000_000, 0, P)
        .java("batch.size")
        .max(INT_MAX)
        .core(&["ProducerConfig.batch_size"], "Most bytes per partition batch (librdkafka's default; Java's is 16384); 0 = a batch per record. A batch holds buffer_memory as it grows, in doubling chunks from 16 KiB."),
    int("buffer_memory", 33_554_432, 0, P)
        .java("buffer.memory")
        .core(&["ProducerConfig.buffer_memory"], "Bytes of records waiting to be sent; send blocks (max_block_ms) past it."),
    int("max_block_ms", 60_000, 0, P)
        .java("max.block.ms")
        .core(&["ProducerConfig.max_block_ms"], "How long send waits for metadata or buffer memory."),
    int("max_request_size", 1_048_576, 1, P)
        .java("max.request.size")
        .max(INT_MAX)
        .core(&["ProducerConfig.max_request_size"], "Largest Produce request (and record)."),
    opt("compression_type", Kind::Str, Default::Str("none"), P)
        .java("compression.type")
        .aliases(&["compression.codec"])
        .choices(&["none", "gzip", "snappy", "lz4", "zstd"])
        .core(&["Compression.codec"], "Codec of record batches."),
    int("compression_level", -1, -1, P)
        .java("compression.level")
        .max(22)
        .core(&["Compression.level"], "Codec level; -1 the codec's default."),
    opt("enable_idempotence", Kind::Bool, Default::Bool(true), P)
        .java("enable.idempotence")
        .core(
            &["ProducerConfig.enable_idempotence"],
            "Exactly-once per partition (docs/semantics.md §5); given up quietly when a default conflicts, an error when set explicitly.",
        ),
    opt("transactional_id", Kind::Str, Default::Null, P)
        .java("transactional.id")
        .core(
            &["ProducerConfig.transactional_id"],
            "Makes the producer transactional (init_transactions, begin/commit/abort_transaction; docs/semantics.md §7); needs idempotence.",
        ),
    int("transaction_timeout_ms", 60_000, 1, P)
        .java("transaction.timeout.ms")
        .max(INT_MAX)
        .core(
            &["ProducerConfig.transaction_timeout_ms"],
            "How long the coordinator lets a transaction stay open before it aborts it (sent with InitProducerId).",
        ),
    int("retries", INT_MAX, 0, P)
        .java("retries")
        .max(INT_MAX)
        .core(&["ProducerConfig.retries"], "Times a failed batch is sent again (within delivery_timeout_ms)."),
    int("delivery_timeout_ms", 120_000, 1, P)
        .java("delivery.timeout.ms")
        .max(INT_MAX)
        .core(
            &["ProducerConfig.delivery_timeout_ms"],
            "Upper bound on the time to report a record delivered or failed; at least linger_ms + request_timeout_ms.",
        ),
    opt("partitioner", Kind::Str, Default::Str("murmur2"), P)
        .java("partitioner")
        .choices(Partitioner::NAMES)
        .core(
            &["ProducerConfig.partitioner"],
            "Partitioner for records without a partition (librdkafka names; murmur2 keeps unkeyed records sticky as Java does); producer.py also takes a callable.",
        ),
    int("metadata_idle_ms", 300_000, 5000, P | PM)
        .java("metadata.max.idle.ms")
        .low_level_min(0)
        .core(&["ProducerMetadata.metadata_idle_ms"], "Forget a topic's metadata when unused this long (docs/semantics.md §3)."),
    // --- consumer ----------------------------------------------------------------------
    opt("group_id", Kind::Str, Default::Null, C | S)
        .java("group.id")
        .core(
            &["ConsumerConfig.group_id", "ShareConfig.group_id"],
            "Consumer group; None = no group (assign only, no commits). A ShareConsumer names its share group here.",
        ),
    opt("group_instance_id", Kind::Str, Default::Null, C)
        .java("group.instance.id")
        .needs(GROUP)
        .core(&["ConsumerConfig.group_instance_id"], "Static membership id (needs group_id)."),
    opt("group_protocol", Kind::Str, Default::Str("classic"), C)
        .java("group.protocol")
        .choices(&["classic", "consumer"])
        .core(
            &["ConsumerConfig.group_protocol"],
            "classic = JoinGroup/SyncGroup; consumer = KIP-848 (the coordinator assigns; refuses session_timeout_ms, heartbeat_interval_ms, partition_assignment_strategy; docs/semantics.md §6).",
        ),
    opt("group_remote_assignor", Kind::Str, Default::Null, C)
        .java("group.remote.assignor")
        .choices(&["uniform", "range"])
        .needs(&[("group_protocol", "consumer"), ("group_id", "*")])
        .core(&["ConsumerConfig.group_remote_assignor"], "group_protocol=\"consumer\" only: the coordinator's assignor to use (None = the broker's default)."),
    opt("auto_offset_reset", Kind::Str, Default::Str("latest"), C)
        .java("auto.offset.reset")
        .choices(&["earliest", "latest", "none"])
        .core(&["ConsumerConfig.auto_offset_reset"], "Where to start without a committed offset."),
    opt("enable_auto_commit", Kind::Bool, Default::Bool(true), C)
        .java("enable.auto.commit")
        .needs(GROUP)
        .core(&["ConsumerConfig.enable_auto_commit"], "Commit positions every auto_commit_interval_ms (False without group_id)."),
    int("auto_commit_interval_ms", 5000, 0, C)
        .java("auto.commit.interval.ms")
        .core(&["ConsumerConfig.auto_commit_interval_ms"], "Interval of automatic commits."),
    int("session_timeout_ms", 45_000, 1, C)
        .java("session.timeout.ms")
        .core(&["ConsumerConfig.session_timeout_ms"], "A member without heartbeats this long leaves the group."),
    int("heartbeat_interval_ms", 3000, 1, C)
        .java("heartbeat.interval.ms")
        .core(&["ConsumerConfig.heartbeat_interval_ms"], "Heartbeat interval; below session_timeout_ms."),
    int("max_poll_interval_ms", 300_000, 1, C)
        .java("max.poll.interval.ms")
        .core(&["ConsumerConfig.max_poll_interval_ms"], "Longest time between polls before the member leaves the group."),
    int("max_poll_records", 500, 1, C | S)
        .java("max.poll.records")
        .python(
            "consumer.py Consumer.poll, share.py ShareConsumer.poll",
            "Most records one poll returns (a ShareConsumer also asks ShareFetch for at most this many).",
        ),
    opt("partition_assignment_strategy", Kind::StrList, Default::List(&["range", "cooperative-sticky"]), C)
        .java("partition.assignment.strategy")
        .choices(&["range", "roundrobin", "sticky", "cooperative-sticky"])
        .core(&["ConsumerConfig.assignors"], "Assignors offered to the group, preferred first."),
    int("fetch_min_bytes", 1, 0, C | S)
        .java("fetch.min.bytes")
        .max(INT_MAX)
        .core(&["ConsumerConfig.fetch_min_bytes", "ShareConfig.fetch_min_bytes"], "Bytes a fetch waits for (up to fetch_max_wait_ms)."),
    int("fetch_max_bytes", 52_428_800, 0, C | S)
        .java("fetch.max.bytes")
        .max(INT_MAX)
        .core(&["ConsumerConfig.fetch_max_bytes", "ShareConfig.fetch_max_bytes"], "Bytes one fetch answer may hold."),
    int("fetch_max_wait_ms", 500, 0, C | S)
        .java("fetch.max.wait.ms")
        .max(INT_MAX)
        .core(&["ConsumerConfig.fetch_max_wait_ms", "ShareConfig.fetch_max_wait_ms"], "How long the broker holds a fetch for fetch_min_bytes."),
    int("max_partition_fetch_bytes", 1_048_576, 1, C | S)
        .java("max.partition.fetch.bytes")
        .max(INT_MAX)
        .core(&["ConsumerConfig.max_partition_fetch_bytes", "ShareConfig.max_partition_fetch_bytes"], "Bytes per partition in one fetch."),
    opt("isolation_level", Kind::Str, Default::Str("read_uncommitted"), C)
        .java("isolation.level")
        .choices(&["read_uncommitted", "read_committed"])
        .core(&["ConsumerConfig.read_committed"], "read_committed skips aborted transactional records."),
    opt("check_crcs", Kind::Bool, Default::Bool(true), C | S)
        .java("check.crcs")
        .core(&["ConsumerConfig.check_crcs", "ShareConfig.check_crcs"], "Verify record batch CRCs."),
    opt("client_rack", Kind::Str, Default::Null, C | S)
        .java("client.rack")
        .core(&["ConsumerConfig.client_rack", "ShareConfig.client_rack"], "Rack of this client, for fetching from the nearest replica."),
    int("default_api_timeout_ms", 60_000, 1, C | A | S)
        .java("default.api.timeout.ms")
        .core(
            &["ConsumerConfig.default_api_timeout_ms", "AdminConfig.default_api_timeout_ms", "ShareConfig.default_api_timeout_ms"],
            "Timeout of calls given none (Admin: at least request_timeout_ms).",
        ),
    // --- share consumer (KIP-932) ------------------------------------------------------
    opt("share_acknowledgement_mode", Kind::Str, Default::Str("implicit"), S)
        .java("share.acknowledgement.mode")
        .choices(&["implicit", "explicit"])
        .core(
            &["ShareConfig.ack_mode"],
            "implicit: every record poll returned is accepted at the next poll or commit; explicit: acknowledge() each record before polling again (docs/semantics.md §11.5).",
        ),
    // --- Python-side callbacks ---------------------------------------------------------
    opt("error_cb", Kind::Callable, Default::Null, PCA)
        .java("error_cb")
        .python(
            "_events.dispatch, from poll/flush (Producer, Consumer) or each call (Admin)",
            "Called with a KafkaError for connection errors, in the application's thread.",
        ),
    int("statistics_interval_ms", 0, 0, P | C)
        .java("statistics.interval.ms")
        .max(86_400_000)
        .python(
            "_stats.StatsEmitter, from poll/flush (Producer) and poll (Consumer)",
            "Every this many ms stats_cb gets a JSON string of metrics(); 0 = off. Needs stats_cb.",
        ),
    opt("stats_cb", Kind::Callable, Default::Null, P | C)
        .java("stats_cb")
        .python(
            "_stats.StatsEmitter, from poll/flush (Producer) and poll (Consumer)",
            "Called with the JSON snapshot every statistics_interval_ms, in the application's thread.",
        ),
];
