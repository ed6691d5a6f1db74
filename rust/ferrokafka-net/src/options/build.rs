//! From checked option values to the core's config structs. Each option's
//! row in the table names the fields it fills (`Effect::Core`); this is the
//! code that fills them, and [`Effective::fields`] lists them so a test can
//! walk the table and see every option arrive.

use std::collections::HashMap;

use crate::admin::client::AdminConfig;
use crate::consumer::client::ConsumerConfig;
use crate::consumer::config::GroupProtocol;
use crate::consumer::subscription::OffsetResetStrategy;
use crate::error::Error;
use crate::log_context::LogContext;
use crate::metadata::default_updater::UpdaterConfig;
use crate::metadata::MetadataConfig;
use crate::network_client::ClientConfig;
use crate::producer::client::ProducerConfig;
use crate::producer::partitioner::Partitioner;
use crate::protocol::compression::Compression;
use crate::protocol::sasl::Mechanism;
use crate::security::{SaslOptions, Security, SecurityProtocol, TlsOptions, TokenProvider};
use crate::share::config::{AckMode, ShareConfig};

use super::{lookup, Client, Constraint, Raw, Spec, Value, OPTIONS};

/// Why [`Resolved::set`] refused a value.
#[derive(Debug, Clone, Copy)]
pub enum SetError {
    /// No such option, or not one this client takes.
    Unknown,
    /// The value does not fit; what the option accepts.
    Invalid(Constraint<'static>),
}

impl SetError {
    pub fn into_error(self, client: Client, key: &str) -> Error {
        let detail = match self {
            SetError::Unknown => {
                let names: Vec<&str> = OPTIONS
                    .iter()
                    .filter(|o| o.takes(client))
                    .map(|o| o.name)
                    .collect();
                format!(
                    "unknown {} option; accepted options: {}",
                    client.name(),
                    names.join(", ")
                )
            }
            SetError::Invalid(c) => format!("expected {}", c.accepted()),
        };
        Error::Config {
            key: key.into(),
            detail,
        }
    }
}

/// The checked options of one client, defaults filled in.
#[derive(Debug, Clone)]
pub struct Resolved {
    client: Client,
    values: HashMap<&'static str, Value>,
}

impl Resolved {
    /// Every option `client` takes at its default (required ones absent).
    pub fn new(client: Client) -> Resolved {
        let values = OPTIONS
            .iter()
            .filter(|o| o.takes(client))
            .filter_map(|o| Some((o.name, o.default.value()?)))
            .collect();
        Resolved { client, values }
    }

    /// `Resolved::new` with `given` (keys in any accepted spelling) applied.
    pub fn from_pairs<'a>(
        client: Client,
        given: impl IntoIterator<Item = (&'a str, Raw)>,
    ) -> Result<Resolved, Error> {
        let mut r = Resolved::new(client);
        for (k, v) in given {
            r.set(k, &v).map_err(|e| e.into_error(client, k))?;
        }
        r.check_required()?;
        Ok(r)
    }

    pub fn client(&self) -> Client {
        self.client
    }

    /// Check `raw` against the option `key` names and keep it.
    pub fn set(&mut self, key: &str, raw: &Raw) -> Result<&'static Spec, SetError> {
        let spec = lookup(key)
            .filter(|s| s.takes(self.client))
            .ok_or(SetError::Unknown)?;
        let c = spec.constraint(Some(self.client));
        let v = c.coerce(raw).map_err(|()| SetError::Invalid(c))?;
        self.values.insert(spec.name, v);
        Ok(spec)
    }

    /// An error naming the first required option not given.
    pub fn check_required(&self) -> Result<(), Error> {
        for o in OPTIONS.iter().filter(|o| o.takes(self.client)) {
            if !self.values.contains_key(o.name) {
                return Err(Error::Config {
                    key: o.name.into(),
                    detail: format!("{} requires this option", self.client.name()),
                });
            }
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    fn value(&self, name: &str) -> Result<&Value, Error> {
        self.values.get(name).ok_or_else(|| Error::Config {
            key: name.into(),
            detail: format!("missing ({} option not set)", self.client.name()),
        })
    }

    fn wrong(&self, name: &str) -> Error {
        Error::Config {
            key: name.into(),
            detail: format!("unexpected value {:?}", self.values.get(name)),
        }
    }

    pub fn int(&self, name: &str) -> Result<i64, Error> {
        match self.value(name)? {
            Value::Int(i) => Ok(*i),
            _ => Err(self.wrong(name)),
        }
    }

    pub fn flag(&self, name: &str) -> Result<bool, Error> {
        match self.value(name)? {
            Value::Bool(b) => Ok(*b),
            _ => Err(self.wrong(name)),
        }
    }

    pub fn opt_str(&self, name: &str) -> Result<Option<String>, Error> {
        match self.value(name)? {
            Value::Str(s) => Ok(Some(s.clone())),
            Value::Null => Ok(None),
            _ => Err(self.wrong(name)),
        }
    }

    pub fn str(&self, name: &str) -> Result<String, Error> {
        self.opt_str(name)?.ok_or_else(|| self.wrong(name))
    }

    pub fn list(&self, name: &str) -> Result<Vec<String>, Error> {
        match self.value(name)? {
            Value::List(l) => Ok(l.clone()),
            _ => Err(self.wrong(name)),
        }
    }

    fn takes(&self, name: &str) -> bool {
        lookup(name).is_some_and(|s| s.takes(self.client))
    }
}

/// TLS / SASL as configured; [`SecuritySettings::build`] reads the certificates.
#[derive(Debug, Clone)]
pub struct SecuritySettings {
    pub protocol: SecurityProtocol,
    pub tls: TlsOptions,
    pub sasl: Option<SaslOptions>,
}

impl SecuritySettings {
    pub fn build(&self) -> Result<Security, Error> {
        Security::new(self.protocol, self.tls.clone(), self.sasl.clone())
    }
}

/// Everything a client is built from. `network.security` is plaintext until
/// [`Effective::client_config`] builds it from `security`, which reads files.
#[derive(Debug, Clone)]
pub struct Effective {
    pub client: Client,
    pub bootstrap: Vec<String>,
    pub network: Option<ClientConfig>,
    pub security: Option<SecuritySettings>,
    pub updater: Option<UpdaterConfig>,
    pub metadata: Option<MetadataConfig>,
    /// ProducerMetadata's topic expiry.
    pub metadata_idle_ms: Option<i64>,
    pub producer: Option<ProducerConfig>,
    /// Codec and level (None = the codec's default) of record batches.
    pub compression: Option<(Compression, Option<i32>)>,
    pub consumer: Option<ConsumerConfig>,
    pub share: Option<ShareConfig>,
    pub admin: Option<AdminConfig>,
}

fn bad(key: &str, detail: impl Into<String>) -> Error {
    Error::Config {
        key: key.into(),
        detail: detail.into(),
    }
}

/// Build the config structs of `r`'s client. `token_provider`: the
/// OAUTHBEARER callable, which only the bindings can hold.
pub fn build(r: &Resolved, token_provider: Option<TokenProvider>) -> Result<Effective, Error> {
    let client = r.client();
    let high_level = matches!(
        client,
        Client::Producer | Client::Consumer | Client::Admin | Client::ShareConsumer
    );
    let mut e = Effective {
        client,
        bootstrap: Vec::new(),
        network: None,
        security: None,
        updater: None,
        metadata: None,
        metadata_idle_ms: None,
        producer: None,
        compression: None,
        consumer: None,
        share: None,
        admin: None,
    };
    if r.takes("bootstrap_servers") {
        e.bootstrap = r.list("bootstrap_servers")?;
        let idle = r.int("connections_max_idle_ms")?;
        let net = ClientConfig {
            client_id: r.str("client_id")?,
            max_in_flight_requests_per_connection: r.int("max_in_flight_requests_per_connection")?
                as usize,
            request_timeout_ms: r.int("request_timeout_ms")?,
            reconnect_backoff_ms: r.int("reconnect_backoff_ms")?,
            reconnect_backoff_max_ms: r.int("reconnect_backoff_max_ms")?,
            // -1: never close idle connections (Java).
            connections_max_idle_ms: if idle < 0 { i64::MAX } else { idle },
            socket_connection_setup_timeout_ms: r.int("socket_connection_setup_timeout_ms")?,
            send_buffer_bytes: r.int("send_buffer_bytes")? as i32,
            receive_buffer_bytes: r.int("receive_buffer_bytes")? as i32,
            max_response_size: r.int("max_response_size")? as usize,
            security: Security::plaintext(),
            // The raw NetworkClient has no telemetry agent: off there.
            enable_metrics_push: r.takes("enable_metrics_push") && r.flag("enable_metrics_push")?,
            log: None,
        };
        net.validate()?;
        e.network = Some(net);
        e.security = Some(security(r, token_provider)?);
    }
    if high_level {
        e.updater = Some(UpdaterConfig {
            request_timeout_ms: r.int("request_timeout_ms")?,
            ..UpdaterConfig::default()
        });
    }
    if r.takes("metadata_max_age_ms") {
        e.metadata = Some(MetadataConfig {
            refresh_backoff_ms: r.int("retry_backoff_ms")?,
            refresh_backoff_max_ms: r.int("retry_backoff_max_ms")?,
            metadata_expire_ms: r.int("metadata_max_age_ms")?,
            rng_seed: None,
        });
    }
    if r.takes("metadata_idle_ms") {
        e.metadata_idle_ms = Some(r.int("metadata_idle_ms")?);
    }
    match client {
        Client::Producer => producer(r, &mut e)?,
        Client::Consumer => e.consumer = Some(consumer(r)?),
        Client::ShareConsumer => e.share = Some(share(r)?),
        Client::Admin => {
            e.admin = Some(AdminConfig {
                request_timeout_ms: r.int("request_timeout_ms")?,
                retry_backoff_ms: r.int("retry_backoff_ms")?,
                default_api_timeout_ms: r.int("default_api_timeout_ms")?,
            })
        }
        _ => {}
    }
    Ok(e)
}

fn security(
    r: &Resolved,
    token_provider: Option<TokenProvider>,
) -> Result<SecuritySettings, Error> {
    let name = r.str("security_protocol")?;
    let protocol = SecurityProtocol::from_name(&name)
        .ok_or_else(|| bad("security_protocol", format!("unknown protocol {name:?}")))?;
    let tls = TlsOptions {
        ca_file: r.opt_str("ssl_cafile")?,
        cert_file: r.opt_str("ssl_certfile")?,
        key_file: r.opt_str("ssl_keyfile")?,
        check_hostname: r.flag("ssl_check_hostname")?,
    };
    let sasl = if protocol.uses_sasl() {
        let name = r.str("sasl_mechanism")?;
        let mechanism = Mechanism::from_name(&name)
            .ok_or_else(|| bad("sasl_mechanism", format!("unknown mechanism {name:?}")))?;
        Some(SaslOptions {
            mechanism,
            username: r.opt_str("sasl_username")?.unwrap_or_default(),
            password: r.opt_str("sasl_password")?.unwrap_or_default(),
            token_provider,
        })
    } else {
        None
    };
    Ok(SecuritySettings {
        protocol,
        tls,
        sasl,
    })
}

fn producer(r: &Resolved, e: &mut Effective) -> Result<(), Error> {
    let acks = match r.str("acks")?.as_str() {
        "all" => -1,
        "0" => 0,
        "1" => 1,
        other => return Err(bad("acks", format!("unexpected value {other:?}"))),
    };
    let pcfg = ProducerConfig {
        acks,
        linger_ms: r.int("linger_ms")?,
        batch_size: r.int("batch_size")? as usize,
        buffer_memory: r.int("buffer_memory")? as usize,
        max_block_ms: r.int("max_block_ms")?,
        enable_idempotence: r.flag("enable_idempotence")?,
        retries: r.int("retries")? as u32,
        retry_backoff_ms: r.int("retry_backoff_ms")?,
        retry_backoff_max_ms: r.int("retry_backoff_max_ms")?,
        request_timeout_ms: r.int("request_timeout_ms")?,
        delivery_timeout_ms: r.int("delivery_timeout_ms")?,
        max_request_size: r.int("max_request_size")? as usize,
        // The table's choices are Partitioner::NAMES, so the name is known.
        partitioner: Partitioner::from_name(&r.str("partitioner")?).unwrap_or_default(),
        partitioner_adaptive: true,
        transactional_id: r.opt_str("transactional_id")?,
        transaction_timeout_ms: r.int("transaction_timeout_ms")? as i32,
        ..ProducerConfig::default()
    };
    let max_in_flight = r.int("max_in_flight_requests_per_connection")? as usize;
    pcfg.validate(max_in_flight)?;
    e.producer = Some(pcfg);
    let name = r.str("compression_type")?;
    let codec = Compression::from_name(&name)
        .ok_or_else(|| bad("compression_type", format!("unknown codec {name:?}")))?;
    let level = r.int("compression_level")?;
    e.compression = Some((codec, (level >= 0).then_some(level as i32)));
    Ok(())
}

fn consumer(r: &Resolved) -> Result<ConsumerConfig, Error> {
    let reset = r.str("auto_offset_reset")?;
    let ccfg = ConsumerConfig {
        group_id: r.opt_str("group_id")?,
        group_instance_id: r.opt_str("group_instance_id")?,
        auto_offset_reset: OffsetResetStrategy::parse(&reset)
            .ok_or_else(|| bad("auto_offset_reset", format!("unknown strategy {reset:?}")))?,
        enable_auto_commit: r.flag("enable_auto_commit")?,
        auto_commit_interval_ms: r.int("auto_commit_interval_ms")?,
        session_timeout_ms: r.int("session_timeout_ms")?,
        heartbeat_interval_ms: r.int("heartbeat_interval_ms")?,
        max_poll_interval_ms: r.int("max_poll_interval_ms")?,
        assignors: r.list("partition_assignment_strategy")?,
        fetch_min_bytes: r.int("fetch_min_bytes")? as i32,
        fetch_max_bytes: r.int("fetch_max_bytes")? as i32,
        fetch_max_wait_ms: r.int("fetch_max_wait_ms")? as i32,
        max_partition_fetch_bytes: r.int("max_partition_fetch_bytes")? as i32,
        read_committed: r.str("isolation_level")? == "read_committed",
        check_crcs: r.flag("check_crcs")?,
        client_rack: r.opt_str("client_rack")?,
        retry_backoff_ms: r.int("retry_backoff_ms")?,
        request_timeout_ms: r.int("request_timeout_ms")?,
        default_api_timeout_ms: r.int("default_api_timeout_ms")?,
        group_protocol: {
            let p = r.str("group_protocol")?;
            GroupProtocol::parse(&p)
                .ok_or_else(|| bad("group_protocol", format!("unknown protocol {p:?}")))?
        },
        group_remote_assignor: r.opt_str("group_remote_assignor")?,
    };
    ccfg.validate()?;
    Ok(ccfg)
}

/// The share consumer's settings. `group_id` is required here (a share
/// consumer always belongs to a share group).
fn share(r: &Resolved) -> Result<ShareConfig, Error> {
    let mode = r.str("share_acknowledgement_mode")?;
    let cfg = ShareConfig {
        group_id: r
            .opt_str("group_id")?
            .ok_or_else(|| bad("group_id", "a ShareConsumer needs the share group's id"))?,
        client_rack: r.opt_str("client_rack")?,
        ack_mode: AckMode::from_name(&mode).ok_or_else(|| {
            bad(
                "share_acknowledgement_mode",
                format!("unknown mode {mode:?}"),
            )
        })?,
        max_poll_records: r.int("max_poll_records")? as i32,
        fetch_min_bytes: r.int("fetch_min_bytes")? as i32,
        fetch_max_bytes: r.int("fetch_max_bytes")? as i32,
        fetch_max_wait_ms: r.int("fetch_max_wait_ms")? as i32,
        max_partition_fetch_bytes: r.int("max_partition_fetch_bytes")? as i32,
        check_crcs: r.flag("check_crcs")?,
        request_timeout_ms: r.int("request_timeout_ms")?,
        retry_backoff_ms: r.int("retry_backoff_ms")?,
        default_api_timeout_ms: r.int("default_api_timeout_ms")?,
    };
    cfg.validate()?;
    Ok(cfg)
}

impl Effective {
    /// The network client's config with its security built (certificates read).
    pub fn client_config(&self) -> Result<ClientConfig, Error> {
        let mut net = self
            .network
            .clone()
            .ok_or_else(|| bad("bootstrap_servers", "this client has no network config"))?;
        if let Some(s) = &self.security {
            net.security = s.build()?;
        }
        // Java's names for the kinds (the raw NetworkClient: its own).
        let (kind, extra) = match self.client {
            Client::Producer => (
                "Producer",
                self.producer
                    .as_ref()
                    .and_then(|p| p.transactional_id.as_deref())
                    .map(|t| ("transactionalId", t)),
            ),
            Client::Consumer => (
                "Consumer",
                self.consumer
                    .as_ref()
                    .and_then(|c| c.group_id.as_deref())
                    .map(|g| ("groupId", g)),
            ),
            Client::ShareConsumer => (
                "ShareConsumer",
                self.share
                    .as_ref()
                    .map(|s| ("groupId", s.group_id.as_str())),
            ),
            Client::Admin => ("AdminClient", None),
            Client::NetworkClient => ("NetworkClient", None),
            Client::Metadata | Client::ProducerMetadata => return Ok(net),
        };
        net.log = Some(LogContext::new(kind, &net.client_id, extra));
        Ok(net)
    }

    /// Every field the options fill, as `Struct.field` and its value (Debug),
    /// passwords redacted. TLS and SASL fields only appear when the security
    /// protocol uses them.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> = Vec::new();
        macro_rules! put {
            ($s:expr, $prefix:literal, [$($f:ident),* $(,)?]) => {
                $(out.push((concat!($prefix, ".", stringify!($f)), format!("{:?}", $s.$f)));)*
            };
        }
        if self.network.is_some() {
            out.push(("bootstrap", format!("{:?}", self.bootstrap)));
        }
        if let Some(n) = &self.network {
            put!(
                n,
                "ClientConfig",
                [
                    client_id,
                    max_in_flight_requests_per_connection,
                    request_timeout_ms,
                    reconnect_backoff_ms,
                    reconnect_backoff_max_ms,
                    connections_max_idle_ms,
                    socket_connection_setup_timeout_ms,
                    send_buffer_bytes,
                    receive_buffer_bytes,
                    max_response_size,
                    enable_metrics_push,
                ]
            );
        }
        if let Some(s) = &self.security {
            put!(s, "Security", [protocol]);
            if s.protocol.uses_tls() {
                put!(
                    s.tls,
                    "TlsOptions",
                    [ca_file, cert_file, key_file, check_hostname]
                );
            }
            if let Some(sasl) = &s.sasl {
                put!(sasl, "SaslOptions", [mechanism, username]);
                let redacted = if sasl.password.is_empty() {
                    ""
                } else {
                    "<redacted>"
                };
                out.push(("SaslOptions.password", redacted.into()));
                let provider = if sasl.token_provider.is_some() {
                    "set"
                } else {
                    "unset"
                };
                out.push(("SaslOptions.token_provider", provider.into()));
            }
        }
        if let Some(u) = &self.updater {
            put!(
                u,
                "UpdaterConfig",
                [
                    request_timeout_ms,
                    rebootstrap,
                    rebootstrap_trigger_ms,
                    unreachable_rebootstrap_ms,
                ]
            );
        }
        if let Some(m) = &self.metadata {
            put!(
                m,
                "MetadataConfig",
                [
                    refresh_backoff_ms,
                    refresh_backoff_max_ms,
                    metadata_expire_ms
                ]
            );
        }
        if let Some(idle) = self.metadata_idle_ms {
            out.push(("ProducerMetadata.metadata_idle_ms", idle.to_string()));
        }
        if let Some(p) = &self.producer {
            put!(
                p,
                "ProducerConfig",
                [
                    acks,
                    linger_ms,
                    batch_size,
                    buffer_memory,
                    max_block_ms,
                    enable_idempotence,
                    retries,
                    retry_backoff_ms,
                    retry_backoff_max_ms,
                    request_timeout_ms,
                    delivery_timeout_ms,
                    max_request_size,
                    partitioner,
                    partitioner_adaptive,
                    max_in_flight_per_partition,
                    transactional_id,
                    transaction_timeout_ms,
                ]
            );
        }
        if let Some((codec, level)) = &self.compression {
            out.push(("Compression.codec", format!("{codec:?}")));
            out.push(("Compression.level", format!("{level:?}")));
        }
        if let Some(c) = &self.consumer {
            put!(
                c,
                "ConsumerConfig",
                [
                    group_id,
                    group_instance_id,
                    auto_offset_reset,
                    enable_auto_commit,
                    auto_commit_interval_ms,
                    session_timeout_ms,
                    heartbeat_interval_ms,
                    max_poll_interval_ms,
                    assignors,
                    fetch_min_bytes,
                    fetch_max_bytes,
                    fetch_max_wait_ms,
                    max_partition_fetch_bytes,
                    read_committed,
                    check_crcs,
                    client_rack,
                    retry_backoff_ms,
                    request_timeout_ms,
                    default_api_timeout_ms,
                    group_protocol,
                    group_remote_assignor,
                ]
            );
        }
        if let Some(c) = &self.share {
            put!(
                c,
                "ShareConfig",
                [
                    group_id,
                    client_rack,
                    ack_mode,
                    max_poll_records,
                    fetch_min_bytes,
                    fetch_max_bytes,
                    fetch_max_wait_ms,
                    max_partition_fetch_bytes,
                    check_crcs,
                    request_timeout_ms,
                    retry_backoff_ms,
                    default_api_timeout_ms,
                ]
            );
        }
        if let Some(a) = &self.admin {
            put!(
                a,
                "AdminConfig",
                [request_timeout_ms, retry_backoff_ms, default_api_timeout_ms]
            );
        }
        out
    }
}
