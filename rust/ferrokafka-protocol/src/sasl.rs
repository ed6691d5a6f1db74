//! SASL mechanisms as sans-IO state machines: each turns the server's
//! challenge into the client's next message. The network crate carries the
//! bytes in SaslAuthenticate requests.
//!
//! * PLAIN (RFC 4616): one message, `authzid NUL authcid NUL password`.
//! * SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): client-first,
//!   server-first -> client-final (proof), server-final (server signature,
//!   checked: a server that does not know the password cannot fake it).
//! * OAUTHBEARER (RFC 7628): one message carrying the bearer token.
//!
//! Secrets are never formatted: `Debug` of these types prints no password,
//! salted password or token.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use crate::error::{ProtocolError, Result};

/// The mechanisms Kafka brokers offer that we implement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl Mechanism {
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "PLAIN" => Mechanism::Plain,
            "SCRAM-SHA-256" => Mechanism::ScramSha256,
            "SCRAM-SHA-512" => Mechanism::ScramSha512,
            "OAUTHBEARER" => Mechanism::OAuthBearer,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

fn bad(detail: impl Into<String>) -> ProtocolError {
    ProtocolError::invalid("SASL exchange", detail.into())
}

/// PLAIN's single message.
pub fn plain_message(username: &str, password: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(2 + username.len() + password.len());
    m.push(0);
    m.extend_from_slice(username.as_bytes());
    m.push(0);
    m.extend_from_slice(password.as_bytes());
    m
}

/// OAUTHBEARER's single message (RFC 7628 section 3.1), with optional
/// SASL extensions (KIP-342).
pub fn oauthbearer_message(token: &str, extensions: &[(String, String)]) -> Vec<u8> {
    let mut m = format!("n,,\x01auth=Bearer {token}");
    for (k, v) in extensions {
        m.push('\x01');
        m.push_str(k);
        m.push('=');
        m.push_str(v);
    }
    m.push_str("\x01\x01");
    m.into_bytes()
}

/// The hash a SCRAM mechanism is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramHash {
    Sha256,
    Sha512,
    /// SCRAM-SHA-1: not offered to brokers (Kafka has no SCRAM-SHA-1); kept so
    /// the RFC 5802 test vector can pin the shared code.
    #[cfg(test)]
    Sha1ForTests,
}

fn hmac(h: ScramHash, key: &[u8], data: &[u8]) -> Vec<u8> {
    match h {
        ScramHash::Sha256 => {
            let mut m = Hmac::<Sha256>::new_from_slice(key).expect("hmac takes any key length");
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        ScramHash::Sha512 => {
            let mut m = Hmac::<Sha512>::new_from_slice(key).expect("hmac takes any key length");
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        #[cfg(test)]
        ScramHash::Sha1ForTests => {
            let mut m = Hmac::<sha1::Sha1>::new_from_slice(key).expect("hmac takes any key length");
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
    }
}

fn hash(h: ScramHash, data: &[u8]) -> Vec<u8> {
    match h {
        ScramHash::Sha256 => Sha256::digest(data).to_vec(),
        ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        #[cfg(test)]
        ScramHash::Sha1ForTests => sha1::Sha1::digest(data).to_vec(),
    }
}

/// RFC 5802 `Hi()`: PBKDF2 with HMAC as the PRF, one block.
fn hi(h: ScramHash, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut block = salt.to_vec();
    block.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac(h, password, &block);
    let mut out = u.clone();
    for _ in 1..iterations {
        u = hmac(h, password, &u);
        for (o, x) in out.iter_mut().zip(&u) {
            *o ^= x;
        }
    }
    out
}

/// `saslname` escaping of RFC 5802: `=` and `,` in the user name.
fn escape_user(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

/// Lowest iteration count we accept from a server (Kafka's minimum is 4096;
/// fewer would let a rogue server ask for a cheap-to-crack proof).
pub const MIN_ITERATIONS: u32 = 4096;

/// Highest iteration count we accept. Kafka itself refuses to store SCRAM
/// credentials above 16384 iterations; the cap is far above that and only
/// stops a rogue server from parking the connection task in PBKDF2 for
/// minutes (`i=4294967295` costs hours of HMAC). Found by the `sasl_scram`
/// fuzz target.
pub const MAX_ITERATIONS: u32 = 1_000_000;

enum ScramState {
    Initial,
    FirstSent { client_first_bare: String },
    FinalSent { server_signature: Vec<u8> },
    Done,
}

/// A SCRAM client conversation.
pub struct ScramClient {
    hash: ScramHash,
    user: String,
    password: String,
    nonce: String,
    min_iterations: u32,
    max_iterations: u32,
    state: ScramState,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("hash", &self.hash)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl ScramClient {
    /// `nonce`: printable ASCII without `,` (the caller draws it from a
    /// CSPRNG; fixed in tests).
    pub fn new(hash: ScramHash, user: &str, password: &str, nonce: &str) -> Self {
        ScramClient {
            hash,
            user: user.to_string(),
            password: password.to_string(),
            nonce: nonce.to_string(),
            min_iterations: MIN_ITERATIONS,
            max_iterations: MAX_ITERATIONS,
            state: ScramState::Initial,
        }
    }

    /// For RFC test vectors, which use 4096 or fewer iterations.
    #[doc(hidden)]
    pub fn with_min_iterations(mut self, n: u32) -> Self {
        self.min_iterations = n;
        self
    }

    /// For the fuzz target, which must not spend seconds per input.
    #[doc(hidden)]
    pub fn with_max_iterations(mut self, n: u32) -> Self {
        self.max_iterations = n;
        self
    }

    /// `n,,n=user,r=nonce`
    pub fn client_first(&mut self) -> Vec<u8> {
        let bare = format!("n={},r={}", escape_user(&self.user), self.nonce);
        let msg = format!("n,,{bare}");
        self.state = ScramState::FirstSent {
            client_first_bare: bare,
        };
        msg.into_bytes()
    }

    /// server-first (`r=...,s=...,i=...`) -> client-final with the proof.
    pub fn handle_server_first(&mut self, server_first: &[u8]) -> Result<Vec<u8>> {
        let ScramState::FirstSent { client_first_bare } = &self.state else {
            return Err(bad("server-first message out of order"));
        };
        let sf = std::str::from_utf8(server_first).map_err(|_| bad("server-first is not UTF-8"))?;
        let (mut nonce, mut salt, mut iters) = (None, None, None);
        for attr in sf.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => {
                    salt = Some(B64.decode(v).map_err(|_| bad("salt is not base64"))?)
                }
                Some(("i", v)) => {
                    iters = Some(
                        v.parse::<u32>()
                            .map_err(|_| bad("iteration count is not a number"))?,
                    )
                }
                Some(("e", v)) => return Err(bad(format!("server error: {v}"))),
                _ => {}
            }
        }
        let nonce = nonce.ok_or_else(|| bad("server-first has no nonce"))?;
        let salt = salt.ok_or_else(|| bad("server-first has no salt"))?;
        let iters = iters.ok_or_else(|| bad("server-first has no iteration count"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() <= self.nonce.len() {
            return Err(bad("server nonce does not extend the client nonce"));
        }
        if iters < self.min_iterations {
            return Err(bad(format!(
                "iteration count {iters} below the minimum {}",
                self.min_iterations
            )));
        }
        if iters > self.max_iterations {
            return Err(bad(format!(
                "iteration count {iters} above the maximum {}",
                self.max_iterations
            )));
        }
        let salted = hi(self.hash, self.password.as_bytes(), &salt, iters);
        let client_key = hmac(self.hash, &salted, b"Client Key");
        let stored_key = hash(self.hash, &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{sf},{without_proof}");
        let client_signature = hmac(self.hash, &stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = hmac(self.hash, &salted, b"Server Key");
        let server_signature = hmac(self.hash, &server_key, auth_message.as_bytes());
        self.state = ScramState::FinalSent { server_signature };
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// server-final (`v=signature` or `e=error`): Ok when the server proved
    /// it knows the password.
    pub fn handle_server_final(&mut self, server_final: &[u8]) -> Result<()> {
        let ScramState::FinalSent { server_signature } = &self.state else {
            return Err(bad("server-final message out of order"));
        };
        let s = std::str::from_utf8(server_final).map_err(|_| bad("server-final is not UTF-8"))?;
        if let Some(e) = s.strip_prefix("e=") {
            return Err(bad(format!("server error: {e}")));
        }
        let v = s
            .strip_prefix("v=")
            .ok_or_else(|| bad("server-final has no verifier"))?;
        let v = B64
            .decode(v.split(',').next().unwrap_or_default())
            .map_err(|_| bad("server signature is not base64"))?;
        if v != *server_signature {
            return Err(bad(
                "the server's signature does not match: it does not know the password",
            ));
        }
        self.state = ScramState::Done;
        Ok(())
    }

    pub fn is_done(&self) -> bool {
        matches!(self.state, ScramState::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5802 section 5 (SCRAM-SHA-1), user "user", password "pencil".
    #[test]
    fn rfc5802_sha1_vector() {
        let mut c = ScramClient::new(
            ScramHash::Sha1ForTests,
            "user",
            "pencil",
            "fyko+d2lbbFgONRv9qkxdawL",
        )
        .with_min_iterations(4096);
        assert_eq!(c.client_first(), b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL");
        let cf = c
            .handle_server_first(
                b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            )
            .unwrap();
        assert_eq!(
            String::from_utf8(cf).unwrap(),
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
        );
        c.handle_server_final(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")
            .unwrap();
        assert!(c.is_done());
    }

    /// RFC 7677 section 3 (SCRAM-SHA-256).
    #[test]
    fn rfc7677_sha256_vector() {
        let mut c = ScramClient::new(ScramHash::Sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(c.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let cf = c
            .handle_server_first(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap();
        assert_eq!(
            String::from_utf8(cf).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.handle_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
    }

    #[test]
    fn wrong_server_signature_and_server_errors_are_refused() {
        let mut c = ScramClient::new(ScramHash::Sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        c.client_first();
        c.handle_server_first(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").unwrap();
        assert!(c.handle_server_final(b"v=AAAA").is_err());
        let mut c = ScramClient::new(ScramHash::Sha512, "u", "p", "abc");
        c.client_first();
        assert!(c.handle_server_first(b"e=unknown-user").is_err());
        // a server nonce that does not extend ours, and a cheap iteration count
        let mut c = ScramClient::new(ScramHash::Sha512, "u", "p", "abc");
        c.client_first();
        assert!(c
            .handle_server_first(b"r=xyz123,s=QSXCR+Q6sek8bf92,i=4096")
            .is_err());
        let mut c = ScramClient::new(ScramHash::Sha512, "u", "p", "abc");
        c.client_first();
        assert!(c
            .handle_server_first(b"r=abc123,s=QSXCR+Q6sek8bf92,i=1")
            .is_err());
        // an iteration count that would park the task in PBKDF2 for hours
        let mut c = ScramClient::new(ScramHash::Sha512, "u", "p", "abc");
        c.client_first();
        let t0 = std::time::Instant::now();
        let err = c
            .handle_server_first(b"r=abc123,s=QSXCR+Q6sek8bf92,i=4294967295")
            .unwrap_err();
        assert!(err.to_string().contains("above the maximum"), "{err}");
        assert!(t0.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn user_names_are_escaped_and_debug_hides_secrets() {
        let mut c = ScramClient::new(ScramHash::Sha256, "a=b,c", "hunter2", "n");
        assert_eq!(c.client_first(), b"n,,n=a=3Db=2Cc,r=n");
        assert!(!format!("{c:?}").contains("hunter2"));
        assert_eq!(plain_message("u", "p"), b"\0u\0p");
        assert_eq!(
            oauthbearer_message("tok", &[]),
            b"n,,\x01auth=Bearer tok\x01\x01"
        );
    }
}
