//! Connection security: TLS (rustls) and SASL, applied by the transport to a
//! fresh TCP connection before the client core sees it as connected.
//!
//! Order on the wire (as the Java client): TCP, TLS handshake (SSL,
//! SASL_SSL), then SaslHandshake v1 + SaslAuthenticate rounds (SASL_*),
//! then the core's ApiVersions. A refusal at either step is an
//! `Error::Authentication` (Java's SslAuthenticationException is an
//! AuthenticationException too): the core marks the node AUTH_FAILED and the
//! metadata stores it as fatal, so callers fail fast instead of retrying.
//!
//! KIP-368 re-authentication: when the broker announces a session lifetime,
//! the connection is closed (and reopened, authenticating again) before it
//! runs out, at 85-95% of the lifetime (jittered so connections do not all
//! reconnect at once). Requests in flight at that moment fail as disconnects
//! and are retried by the layers above.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use ferrokafka_protocol::frame::{decode_response, encode_request, RequestHeader};
use ferrokafka_protocol::kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;
use ferrokafka_protocol::sasl::{
    oauthbearer_message, plain_message, Mechanism, ScramClient, ScramHash,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::cluster::Node;
use crate::error::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// TLS settings as given by the user (file paths, PEM).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// CA bundle; None = the system's trust store.
    pub ca_file: Option<String>,
    /// Client certificate chain and key, for mutual TLS.
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    /// Verify that the certificate names the host we connect to (Java's
    /// `ssl.endpoint.identification.algorithm=https`, on by default).
    pub check_hostname: bool,
}

/// Returns an OAUTHBEARER token (called before each authentication).
pub type TokenProvider = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

#[derive(Clone)]
pub struct SaslOptions {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: String,
    pub token_provider: Option<TokenProvider>,
}

impl std::fmt::Debug for SaslOptions {
    // Never print the password or tokens (they end up in logs and reprs).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslOptions")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// What the transport applies to each connection. Cheap to clone.
#[derive(Clone, Default)]
pub struct Security {
    pub protocol: SecurityProtocol,
    tls: Option<Arc<rustls::ClientConfig>>,
    check_hostname: bool,
    pub sasl: Option<Arc<SaslOptions>>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("protocol", &self.protocol)
            .field("tls", &self.tls.is_some())
            .field("check_hostname", &self.check_hostname)
            .field("sasl", &self.sasl)
            .finish()
    }
}

fn cfg_err(key: &str, detail: impl Into<String>) -> Error {
    Error::Config {
        key: key.into(),
        detail: detail.into(),
    }
}

fn read_pem(path: &str, key: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| cfg_err(key, format!("cannot read {path}: {e}")))
}

impl Security {
    pub fn plaintext() -> Self {
        Security::default()
    }

    /// Validate and build everything once (certificates are parsed here, so
    /// a bad file is a `Config` error at construction, not a connect failure).
    pub fn new(
        protocol: SecurityProtocol,
        tls: TlsOptions,
        sasl: Option<SaslOptions>,
    ) -> Result<Self, Error> {
        let tls_cfg = if protocol.uses_tls() {
            Some(Arc::new(build_tls(&tls)?))
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            let s = sasl.ok_or_else(|| {
                cfg_err(
                    "sasl_mechanism",
                    "SASL_PLAINTEXT / SASL_SSL need SASL settings",
                )
            })?;
            match s.mechanism {
                Mechanism::OAuthBearer => {
                    if s.token_provider.is_none() {
                        return Err(cfg_err(
                            "sasl_oauth_token_provider",
                            "OAUTHBEARER needs a token provider",
                        ));
                    }
                }
                _ => {
                    if s.username.is_empty() {
                        return Err(cfg_err(
                            "sasl_username",
                            format!("{} needs a user name", s.mechanism.name()),
                        ));
                    }
                }
            }
            Some(Arc::new(s))
        } else {
            None
        };
        Ok(Security {
            protocol,
            tls: tls_cfg,
            check_hostname: tls.check_hostname,
            sasl,
        })
    }
}

fn build_tls(o: &TlsOptions) -> Result<rustls::ClientConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    // The certificates of `ssl_cafile`, as given: a broker may present one
    // of them as its own (a self-signed certificate, see KafkaServerVerifier).
    let mut anchors: Vec<rustls::pki_types::CertificateDer<'static>> = Vec::new();
    match &o.ca_file {
        Some(path) => {
            // A file of PEM certificates, or (like librdkafka's
            // `ssl.ca.location` and OpenSSL's CApath) a directory whose
            // files are: every file there that holds PEM certificates counts,
            // others (hash links' duplicates parse fine; READMEs do not) are
            // skipped.
            let files: Vec<std::path::PathBuf> = if std::path::Path::new(path).is_dir() {
                let mut v: Vec<_> = std::fs::read_dir(path)
                    .map_err(|e| cfg_err("ssl_cafile", format!("cannot read {path}: {e}")))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect();
                v.sort();
                v
            } else {
                vec![path.into()]
            };
            let single = files.len() == 1 && !std::path::Path::new(path).is_dir();
            let mut n = 0;
            for f in &files {
                let fname = f.display().to_string();
                let pem = read_pem(&fname, "ssl_cafile")?;
                for c in rustls_pemfile::certs(&mut pem.as_slice()) {
                    let c = match c {
                        Ok(c) => c,
                        Err(e) if single => {
                            return Err(cfg_err("ssl_cafile", format!("{fname}: {e}")))
                        }
                        Err(_) => break,
                    };
                    let der = c.clone();
                    match roots.add(c) {
                        Ok(()) => {
                            n += 1;
                            anchors.push(der);
                        }
                        Err(e) if single => {
                            return Err(cfg_err("ssl_cafile", format!("{fname}: {e}")))
                        }
                        Err(_) => {}
                    }
                }
            }
            if n == 0 {
                return Err(cfg_err(
                    "ssl_cafile",
                    format!("{path} holds no PEM certificate"),
                ));
            }
        }
        None => {
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
        }
    }
    let roots = Arc::new(roots);
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| cfg_err("security_protocol", e.to_string()))?;
    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
        .build()
        .map_err(|e| cfg_err("ssl_cafile", e.to_string()))?;
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(KafkaServerVerifier {
            inner,
            anchors,
            check_hostname: o.check_hostname,
        }));
    let cfg = match (&o.cert_file, &o.key_file) {
        (Some(cert), Some(key)) => {
            let pem = read_pem(cert, "ssl_certfile")?;
            let chain: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
                .collect::<Result<_, _>>()
                .map_err(|e| cfg_err("ssl_certfile", format!("{cert}: {e}")))?;
            if chain.is_empty() {
                return Err(cfg_err(
                    "ssl_certfile",
                    format!("{cert} holds no PEM certificate"),
                ));
            }
            let kpem = read_pem(key, "ssl_keyfile")?;
            let k = rustls_pemfile::private_key(&mut kpem.as_slice())
                .map_err(|e| cfg_err("ssl_keyfile", format!("{key}: {e}")))?
                .ok_or_else(|| cfg_err("ssl_keyfile", format!("{key} holds no PEM private key")))?;
            builder
                .with_client_auth_cert(chain, k)
                .map_err(|e| cfg_err("ssl_keyfile", e.to_string()))?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => {
            return Err(cfg_err(
                "ssl_keyfile",
                "ssl_certfile is set but ssl_keyfile is not",
            ))
        }
        (None, Some(_)) => {
            return Err(cfg_err(
                "ssl_certfile",
                "ssl_keyfile is set but ssl_certfile is not",
            ))
        }
    };
    Ok(cfg)
}

/// The server certificate check: webpki's path validation, plus two things
/// Java's PKIX trust manager and OpenSSL (librdkafka) also do:
/// * a server certificate that is itself one of the configured trust
///   anchors (`ssl_cafile` holds exactly that certificate: a self-signed dev
///   cluster) is trusted as is; webpki refuses it (`CaUsedAsEndEntity`, or
///   `UnknownIssuer` for a non-CA one). Its validity period and, unless
///   turned off, its names are still checked; the handshake signature
///   (verify_tls1x_signature) still proves the server holds its key.
/// * `ssl_check_hostname=False` skips only the name check: the chain must
///   still lead to a trusted CA and be valid.
#[derive(Debug)]
struct KafkaServerVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    anchors: Vec<rustls::pki_types::CertificateDer<'static>>,
    check_hostname: bool,
}

fn is_name_error(e: &rustls::Error) -> bool {
    matches!(
        e,
        rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. }
        )
    )
}

impl rustls::client::danger::ServerCertVerifier for KafkaServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use rustls::client::danger::ServerCertVerified;
        if self
            .anchors
            .iter()
            .any(|a| a.as_ref() == end_entity.as_ref())
        {
            check_validity(end_entity, now)?;
            if self.check_hostname {
                let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&parsed, server_name)?;
            }
            return Ok(ServerCertVerified::assertion());
        }
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(e) if !self.check_hostname && is_name_error(&e) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The validity period of a DER certificate, checked against `now`.
/// webpki does this only while building a path, which a certificate that is
/// its own trust anchor skips, so the two fields are read here.
fn check_validity(
    cert: &rustls::pki_types::CertificateDer<'_>,
    now: rustls::pki_types::UnixTime,
) -> Result<(), rustls::Error> {
    use rustls::CertificateError::{BadEncoding, Expired, NotValidYet};
    let bad = || rustls::Error::InvalidCertificate(BadEncoding);
    let (not_before, not_after) = der_validity(cert.as_ref()).ok_or_else(bad)?;
    let t = now.as_secs() as i64;
    if t < not_before {
        return Err(rustls::Error::InvalidCertificate(NotValidYet));
    }
    if t > not_after {
        return Err(rustls::Error::InvalidCertificate(Expired));
    }
    Ok(())
}

/// (tag, contents, rest) of one DER element; short and long definite lengths.
fn der_next(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, b) = b.split_first()?;
    let (&l0, mut b) = b.split_first()?;
    let len = if l0 < 0x80 {
        l0 as usize
    } else {
        let n = (l0 & 0x7f) as usize;
        if n == 0 || n > 4 || b.len() < n {
            return None;
        }
        let len = b[..n].iter().fold(0usize, |a, &x| (a << 8) | x as usize);
        b = &b[n..];
        len
    };
    (b.len() >= len).then(|| (tag, &b[..len], &b[len..]))
}

/// (notBefore, notAfter) in Unix seconds: Certificate -> TBSCertificate ->
/// [0] version?, serial, signature, issuer, validity.
fn der_validity(cert: &[u8]) -> Option<(i64, i64)> {
    let (0x30, cert, _) = der_next(cert)? else {
        return None;
    };
    let (0x30, tbs, _) = der_next(cert)? else {
        return None;
    };
    let (tag, _, mut rest) = der_next(tbs)?;
    if tag == 0xa0 {
        rest = der_next(rest)?.2; // the version was explicit: skip the serial
    }
    let rest = der_next(rest)?.2; // signature algorithm
    let rest = der_next(rest)?.2; // issuer
    let (0x30, validity, _) = der_next(rest)? else {
        return None;
    };
    let (t1, nb, rest) = der_next(validity)?;
    let (t2, na, _) = der_next(rest)?;
    Some((der_time(t1, nb)?, der_time(t2, na)?))
}

/// UTCTime (YYMMDDHHMMSSZ, 1950-2049) or GeneralizedTime (YYYYMMDDHHMMSSZ).
fn der_time(tag: u8, v: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(v).ok()?.strip_suffix('Z')?;
    let (year, s) = match tag {
        0x17 if s.len() == 12 => {
            let y: i64 = s[..2].parse().ok()?;
            (if y >= 50 { 1900 + y } else { 2000 + y }, &s[2..])
        }
        0x18 if s.len() == 14 => (s[..4].parse().ok()?, &s[4..]),
        _ => return None,
    };
    let f = |i: usize| -> Option<i64> { s.get(i..i + 2)?.parse().ok() };
    let (mo, d, h, mi, se) = (f(0)?, f(2)?, f(4)?, f(6)?, f(8)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    // Days from civil (proleptic Gregorian), as in Howard Hinnant's algorithm.
    let y = if mo <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + se)
}

/// What to do about a failed TLS handshake, for the error message: every
/// refusal says which option to look at.
fn tls_advice(e: &std::io::Error, host: &str) -> String {
    use rustls::CertificateError as C;
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidCertificate(c)) => match c {
            C::UnknownIssuer => "the broker certificate is not signed by a trusted CA: set \
                ssl_cafile to the CA certificate that signed it (PEM), or to the broker's own \
                certificate if it is self-signed"
                .into(),
            C::NotValidForName | C::NotValidForNameContext { .. } => format!(
                "the broker certificate does not name {host:?}: connect by a name or IP \
                 address it lists (subjectAltName), or set ssl_check_hostname=False \
                 (ssl.endpoint.identification.algorithm='') to skip the name check"
            ),
            C::Expired
            | C::ExpiredContext { .. }
            | C::NotValidYet
            | C::NotValidYetContext { .. } => {
                "the broker certificate is outside its validity period: renew it, or check \
                 this machine's clock"
                    .into()
            }
            // webpki's own error, passed through as `Other`.
            C::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
                "the broker presents a CA certificate as its own: put that \
                very certificate in ssl_cafile, or give the broker a certificate signed by the CA"
                    .into()
            }
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => "the broker certificate is not \
                meant for TLS servers (extendedKeyUsage lacks serverAuth): reissue it"
                .into(),
            C::BadSignature | C::BadEncoding => "the broker certificate chain is damaged or \
                does not match the CA in ssl_cafile: check both files"
                .into(),
            _ => "check the broker certificate against ssl_cafile".into(),
        },
        Some(rustls::Error::AlertReceived(a)) => format!(
            "the broker refused the handshake ({a:?}): if it requires client certificates set \
             ssl_certfile and ssl_keyfile to a certificate its CA trusts"
        ),
        Some(rustls::Error::InvalidMessage(_))
        | Some(rustls::Error::InappropriateMessage { .. }) => {
            "the broker did not answer in TLS: check that this port is an SSL listener \
             (security_protocol must match the listener)"
                .into()
        }
        Some(rustls::Error::PeerIncompatible(_)) | Some(rustls::Error::NoCertificatesPresented) => {
            "no TLS version or cipher suite in common with the broker (TLS 1.2+ is required)".into()
        }
        _ if e.kind() == std::io::ErrorKind::UnexpectedEof
            || e.kind() == std::io::ErrorKind::ConnectionReset =>
        {
            "the broker closed the connection during the handshake: check that this port is \
             an SSL listener and, if it requires client certificates, set ssl_certfile and \
             ssl_keyfile"
                .into()
        }
        _ => {
            "check ssl_cafile, ssl_certfile/ssl_keyfile and that the port is an SSL listener".into()
        }
    }
}

/// Any byte stream a connection can run over (TCP or TLS over TCP).
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

pub(crate) fn auth_err(node: &Node, detail: impl std::fmt::Display) -> Error {
    Error::Authentication {
        detail: format!("node {} ({}): {detail}", node.id, node.address()),
    }
}

/// A connection TLS and SASL are done with, ready for requests.
pub enum Secured {
    /// The socket itself (PLAINTEXT, SASL_PLAINTEXT).
    Plain(tokio::net::TcpStream),
    Tls(Box<dyn Stream>),
}

/// The read and write halves of a `Secured`, for the reader and the writer
/// task of a connection, and for a plain socket its write half again, for
/// writes from other threads (`selector.rs`, `Selector::write`).
pub type Halves = (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
    Option<Arc<tokio::net::tcp::OwnedWriteHalf>>,
);

/// A plain socket's write half shared by the writer task (through this)
/// and the threads that write small requests directly.
struct SharedWrite(Arc<tokio::net::tcp::OwnedWriteHalf>);

impl AsyncWrite for SharedWrite {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.poll_write_vectored(cx, &[std::io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let tcp: &tokio::net::TcpStream = self.0.as_ref().as_ref();
        loop {
            std::task::ready!(tcp.poll_write_ready(cx))?;
            match tcp.try_write_vectored(bufs) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                r => return std::task::Poll::Ready(r),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    /// The write direction is shut down when the last holder drops it.
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl Secured {
    fn stream_mut(&mut self) -> &mut dyn Stream {
        match self {
            Secured::Plain(tcp) => tcp,
            Secured::Tls(s) => s.as_mut(),
        }
    }

    /// A socket splits into halves that share no lock. Why: tokio's
    /// generic `split` (all a TLS stream has: one TLS state serves both
    /// directions) puts both halves behind one mutex, held for a whole
    /// read or write call. On loopback a 1 MB `writev` also runs the
    /// receiver's TCP processing, hundreds of microseconds; the reader,
    /// woken for an answer meanwhile, slept on the mutex and had to be
    /// woken again (perf of `thread_cpu.py send_batch_list`: a tenth of the
    /// io threads' futex calls, issue 17).
    pub fn split(self) -> Halves {
        match self {
            Secured::Plain(tcp) => {
                let (rd, wr) = tcp.into_split();
                let wr = Arc::new(wr);
                (Box::new(rd), Box::new(SharedWrite(wr.clone())), Some(wr))
            }
            Secured::Tls(s) => {
                let (rd, wr) = tokio::io::split(s);
                (Box::new(rd), Box::new(wr), None)
            }
        }
    }
}

/// TLS then SASL over a connected socket. Returns the connection to use
/// and the SASL session lifetime (0 = none), after which the connection
/// must go.
pub async fn secure(
    tcp: tokio::net::TcpStream,
    node: &Node,
    sec: &Security,
    client_id: &str,
    timeout: Duration,
) -> Result<(Secured, i64), Error> {
    let mut stream = match &sec.tls {
        None => Secured::Plain(tcp),
        Some(cfg) => {
            let name = rustls::pki_types::ServerName::try_from(node.host.clone()).map_err(|e| {
                Error::Config {
                    key: "bootstrap_servers".into(),
                    detail: format!("{}: {e}", node.host),
                }
            })?;
            let conn = tokio_rustls::TlsConnector::from(cfg.clone());
            match tokio::time::timeout(timeout, conn.connect(name, tcp)).await {
                Ok(Ok(s)) => Secured::Tls(Box::new(s)),
                Ok(Err(e)) => {
                    let advice = tls_advice(&e, &node.host);
                    return Err(auth_err(
                        node,
                        format!("TLS handshake failed: {e}; {advice}"),
                    ));
                }
                Err(_) => {
                    return Err(auth_err(
                        node,
                        format!("TLS handshake timed out after {} ms", timeout.as_millis()),
                    ))
                }
            }
        }
    };
    let mut lifetime = 0;
    if let Some(sasl) = &sec.sasl {
        lifetime = match tokio::time::timeout(
            timeout,
            authenticate(stream.stream_mut(), node, sasl, client_id),
        )
        .await
        {
            Ok(r) => r?,
            Err(_) => {
                return Err(auth_err(
                    node,
                    format!(
                        "SASL authentication timed out after {} ms",
                        timeout.as_millis()
                    ),
                ))
            }
        };
    }
    Ok((stream, lifetime))
}

mod sasl;
use sasl::authenticate;
pub use sasl::reauth_after;

#[cfg(test)]
mod validity_tests {
    use super::{der_time, der_validity};

    #[test]
    fn der_times() {
        assert_eq!(der_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(der_time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(der_time(0x18, b"20240229120000Z"), Some(1_709_208_000));
        assert_eq!(der_time(0x17, b"7001010000Z"), None);
        assert_eq!(der_time(0x18, b"20241301000000Z"), None);
    }

    #[test]
    fn truncated_certificates_do_not_parse() {
        assert_eq!(der_validity(&[]), None);
        assert_eq!(der_validity(&[0x30, 0x82, 0xff]), None);
        assert_eq!(der_validity(&[0x30, 0x03, 0x30, 0x01, 0x02]), None);
    }
}
