//! SASL on a fresh connection, before the network client hears of it:
//! SaslHandshake v1, then SaslAuthenticate v1 rounds (PLAIN, OAUTHBEARER,
//! SCRAM-SHA-256/512), and when to re-authenticate (KIP-368).

use super::*;

async fn round_trip(
    stream: &mut dyn Stream,
    node: &Node,
    correlation_id: i32,
    client_id: &str,
    body: RequestKind,
    key: ApiKey,
    version: i16,
) -> Result<ResponseKind, Error> {
    let header = RequestHeader {
        api_key: key as i16,
        api_version: version,
        correlation_id,
        client_id: Some(client_id.to_string()),
    };
    let mut buf = BytesMut::new();
    encode_request(&mut buf, &header, &body)?;
    let io = |e: std::io::Error| Error::Transport {
        broker: format!("{}/{}", node.id, node.address()),
        detail: format!("during SASL: {e}"),
    };
    stream.write_all(&buf).await.map_err(io)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.map_err(io)?;
    let n = i32::from_be_bytes(len);
    if !(0..=1 << 20).contains(&n) {
        return Err(auth_err(
            node,
            format!("SASL answer of {n} bytes: not a Kafka SASL endpoint?"),
        ));
    }
    let mut frame = BytesMut::zeroed(n as usize);
    stream.read_exact(&mut frame).await.map_err(io)?;
    let (cid, resp, _) = decode_response(key as i16, version, frame.freeze())?;
    if cid != correlation_id {
        return Err(auth_err(
            node,
            format!("SASL answer has correlation id {cid}, expected {correlation_id}"),
        ));
    }
    Ok(resp)
}

/// The SaslAuthenticate v1 exchanges of one authentication, numbered after
/// the handshake.
struct SaslRounds<'a> {
    stream: &'a mut dyn Stream,
    node: &'a Node,
    client_id: &'a str,
    correlation_id: i32,
}

impl SaslRounds<'_> {
    /// Send `bytes`; answer the broker's bytes and the session lifetime it
    /// announced (ms, 0 = unlimited), or its error as an auth failure.
    async fn round(&mut self, bytes: Vec<u8>) -> Result<(Vec<u8>, i64), Error> {
        self.correlation_id += 1;
        let req = RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default().with_auth_bytes(bytes.into()),
        );
        let answer = round_trip(
            self.stream,
            self.node,
            self.correlation_id,
            self.client_id,
            req,
            ApiKey::SaslAuthenticate,
            1,
        )
        .await?;
        match answer {
            ResponseKind::SaslAuthenticate(r) if r.error_code == 0 => {
                Ok((r.auth_bytes.to_vec(), r.session_lifetime_ms))
            }
            ResponseKind::SaslAuthenticate(r) => Err(auth_err(
                self.node,
                format!(
                    "{} [code {}]",
                    r.error_message
                        .as_deref()
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "SASL authentication failed".into()),
                    r.error_code
                ),
            )),
            _ => Err(auth_err(self.node, "unexpected SaslAuthenticate answer")),
        }
    }
}

/// SaslHandshake v1 then SaslAuthenticate v1 rounds. Returns the session
/// lifetime the broker announced (ms, 0 = unlimited).
pub(super) async fn authenticate(
    stream: &mut dyn Stream,
    node: &Node,
    sasl: &SaslOptions,
    client_id: &str,
) -> Result<i64, Error> {
    let mech = sasl.mechanism.name();
    let hs = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mech));
    match round_trip(
        stream,
        node,
        1,
        client_id,
        RequestKind::SaslHandshake(hs),
        ApiKey::SaslHandshake,
        1,
    )
    .await?
    {
        ResponseKind::SaslHandshake(r) if r.error_code == 0 => {}
        ResponseKind::SaslHandshake(r) => {
            let enabled: Vec<String> = r.mechanisms.iter().map(|m| m.to_string()).collect();
            return Err(auth_err(
                node,
                format!(
                    "the broker does not offer {mech} (it offers: {}) [code {}]",
                    enabled.join(", "),
                    r.error_code
                ),
            ));
        }
        _ => return Err(auth_err(node, "unexpected SaslHandshake answer")),
    }
    // Correlation ids 2, 3, ...: the handshake used 1.
    let mut auth = SaslRounds {
        stream,
        node,
        client_id,
        correlation_id: 1,
    };
    let lifetime = match sasl.mechanism {
        Mechanism::Plain | Mechanism::OAuthBearer => {
            let msg = if sasl.mechanism == Mechanism::Plain {
                plain_message(&sasl.username, &sasl.password)
            } else {
                let provider = sasl
                    .token_provider
                    .as_ref()
                    .ok_or_else(|| auth_err(node, "no OAUTHBEARER token provider"))?;
                let token = provider()
                    .map_err(|e| auth_err(node, format!("the token provider failed: {e}")))?;
                oauthbearer_message(&token, &[])
            };
            auth.round(msg).await?.1
        }
        Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
            let hash = if sasl.mechanism == Mechanism::ScramSha256 {
                ScramHash::Sha256
            } else {
                ScramHash::Sha512
            };
            let nonce: String = {
                use rand::Rng;
                let mut rng = rand::thread_rng();
                (0..32)
                    .map(|_| rng.sample(rand::distributions::Alphanumeric) as char)
                    .collect()
            };
            let mut scram = ScramClient::new(hash, &sasl.username, &sasl.password, &nonce);
            let (server_first, _) = auth.round(scram.client_first()).await?;
            let client_final = scram
                .handle_server_first(&server_first)
                .map_err(|e| auth_err(node, e))?;
            let (server_final, lifetime) = auth.round(client_final).await?;
            scram
                .handle_server_final(&server_final)
                .map_err(|e| auth_err(node, e))?;
            lifetime
        }
    };
    Ok(lifetime)
}

/// When to drop an authenticated connection so the next one re-authenticates
/// before the broker's session expires (KIP-368): 85-95% of the lifetime.
pub fn reauth_after(lifetime_ms: i64) -> Option<Duration> {
    if lifetime_ms <= 0 {
        return None;
    }
    let frac = 0.85 + rand::random::<f64>() * 0.10;
    Some(Duration::from_millis(((lifetime_ms as f64) * frac) as u64))
}
