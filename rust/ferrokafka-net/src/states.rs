//! Connection state per node and the reconnect backoff (Java's
//! `ClusterConnectionStates`). Pure: time comes in as `now_ms`, randomness
//! from a seeded generator, so every rule is unit-testable without sleeping.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionState {
    Disconnected,
    Connecting,
    CheckingApiVersions,
    Authenticating,
    Ready,
    AuthFailed,
}

impl ConnectionState {
    pub fn as_str(&self) -> &'static str {
        match self {
            ConnectionState::Disconnected => "DISCONNECTED",
            ConnectionState::Connecting => "CONNECTING",
            ConnectionState::CheckingApiVersions => "CHECKING_API_VERSIONS",
            ConnectionState::Authenticating => "AUTHENTICATING",
            ConnectionState::Ready => "READY",
            ConnectionState::AuthFailed => "AUTH_FAILED",
        }
    }

    /// CONNECTING, CHECKING_API_VERSIONS or AUTHENTICATING: on its way up.
    pub fn is_preparing(&self) -> bool {
        matches!(
            self,
            ConnectionState::Connecting
                | ConnectionState::CheckingApiVersions
                | ConnectionState::Authenticating
        )
    }

    pub fn is_disconnected(&self) -> bool {
        matches!(
            self,
            ConnectionState::Disconnected | ConnectionState::AuthFailed
        )
    }
}

#[derive(Debug, Clone)]
struct NodeState {
    state: ConnectionState,
    last_connect_attempt_ms: i64,
    /// Failures since the last READY; the backoff exponent.
    failed_attempts: u32,
    /// The backoff that applies after the latest failure (jitter included).
    reconnect_backoff_ms: i64,
    last_activity_ms: i64,
}

#[derive(Debug)]
pub struct ClusterConnectionStates {
    reconnect_backoff_ms: i64,
    reconnect_backoff_max_ms: i64,
    jitter: f64,
    rng: StdRng,
    nodes: HashMap<i32, NodeState>,
}

impl ClusterConnectionStates {
    pub fn new(reconnect_backoff_ms: i64, reconnect_backoff_max_ms: i64, seed: u64) -> Self {
        ClusterConnectionStates {
            reconnect_backoff_ms: reconnect_backoff_ms.max(0),
            reconnect_backoff_max_ms: reconnect_backoff_max_ms.max(reconnect_backoff_ms.max(0)),
            jitter: 0.2,
            rng: StdRng::seed_from_u64(seed),
            nodes: HashMap::new(),
        }
    }

    /// For deterministic tests.
    pub fn set_jitter(&mut self, jitter: f64) {
        self.jitter = jitter;
    }

    /// Exponential backoff: base * 2^(failures-1), capped at max, then
    /// multiplied by a uniform factor in [1-jitter, 1+jitter] (Java's
    /// `ExponentialBackoff(base, 2, max, 0.2)`). The cap applies before the
    /// jitter, as in Java, so a capped backoff still spreads reconnect storms.
    pub fn backoff_for(&mut self, failed_attempts: u32) -> i64 {
        if failed_attempts == 0 || self.reconnect_backoff_ms == 0 {
            return self.reconnect_backoff_ms;
        }
        let exp = (failed_attempts - 1).min(40);
        let term = (self.reconnect_backoff_ms as f64) * 2f64.powi(exp as i32);
        let capped = term.min(self.reconnect_backoff_max_ms as f64);
        let factor = if self.jitter > 0.0 {
            self.rng.gen_range(1.0 - self.jitter..=1.0 + self.jitter)
        } else {
            1.0
        };
        (capped * factor).round() as i64
    }

    pub fn state(&self, node: i32) -> ConnectionState {
        self.nodes
            .get(&node)
            .map_or(ConnectionState::Disconnected, |s| s.state)
    }

    /// Never tried, or disconnected and its backoff elapsed.
    pub fn can_connect(&self, node: i32, now_ms: i64) -> bool {
        match self.nodes.get(&node) {
            None => true,
            Some(s) => {
                s.state.is_disconnected()
                    && now_ms - s.last_connect_attempt_ms >= s.reconnect_backoff_ms
            }
        }
    }

    /// Disconnected and still inside its backoff.
    pub fn is_blacked_out(&self, node: i32, now_ms: i64) -> bool {
        match self.nodes.get(&node) {
            None => false,
            Some(s) => {
                s.state.is_disconnected()
                    && now_ms - s.last_connect_attempt_ms < s.reconnect_backoff_ms
            }
        }
    }

    /// Ms until a connect attempt is allowed: 0 if now, `i64::MAX` if the
    /// connection is up or on its way (nothing to wait for).
    pub fn connection_delay(&self, node: i32, now_ms: i64) -> i64 {
        match self.nodes.get(&node) {
            None => 0,
            Some(s) if s.state.is_disconnected() => {
                (s.last_connect_attempt_ms + s.reconnect_backoff_ms - now_ms).max(0)
            }
            Some(_) => i64::MAX,
        }
    }

    pub fn is_ready(&self, node: i32) -> bool {
        self.state(node) == ConnectionState::Ready
    }

    pub fn is_connecting_or_connected(&self, node: i32) -> bool {
        let s = self.state(node);
        s.is_preparing() || s == ConnectionState::Ready
    }

    pub fn is_preparing(&self, node: i32) -> bool {
        self.state(node).is_preparing()
    }

    /// The node's entry, created DISCONNECTED with no failed attempt.
    fn entry(&mut self, node: i32, now_ms: i64, backoff_ms: i64) -> &mut NodeState {
        self.nodes.entry(node).or_insert(NodeState {
            state: ConnectionState::Disconnected,
            last_connect_attempt_ms: now_ms,
            failed_attempts: 0,
            reconnect_backoff_ms: backoff_ms,
            last_activity_ms: now_ms,
        })
    }

    pub fn connecting(&mut self, node: i32, now_ms: i64) {
        let base = self.reconnect_backoff_ms;
        let s = self.entry(node, now_ms, base);
        s.state = ConnectionState::Connecting;
        s.last_connect_attempt_ms = now_ms;
        s.last_activity_ms = now_ms;
    }

    pub fn checking_api_versions(&mut self, node: i32, now_ms: i64) {
        if let Some(s) = self.nodes.get_mut(&node) {
            s.state = ConnectionState::CheckingApiVersions;
            s.last_activity_ms = now_ms;
        }
    }

    pub fn authenticating(&mut self, node: i32) {
        if let Some(s) = self.nodes.get_mut(&node) {
            s.state = ConnectionState::Authenticating;
        }
    }

    /// READY: the backoff starts over from the base.
    pub fn ready(&mut self, node: i32, now_ms: i64) {
        let base = self.reconnect_backoff_ms;
        if let Some(s) = self.nodes.get_mut(&node) {
            s.state = ConnectionState::Ready;
            s.failed_attempts = 0;
            s.reconnect_backoff_ms = base;
            s.last_activity_ms = now_ms;
        }
    }

    /// Connection closed or failed: DISCONNECTED, next backoff grows.
    /// Java counts the backoff from the last *attempt*; a connection that was
    /// up for a long time may therefore reconnect at once, which is intended.
    pub fn disconnected(&mut self, node: i32, now_ms: i64) {
        let failed = self.nodes.get(&node).map_or(0, |s| s.failed_attempts) + 1;
        let backoff = self.backoff_for(failed);
        let s = self.entry(node, now_ms, backoff);
        s.state = ConnectionState::Disconnected;
        s.failed_attempts = failed;
        s.reconnect_backoff_ms = backoff;
    }

    pub fn auth_failed(&mut self, node: i32, now_ms: i64) {
        self.disconnected(node, now_ms);
        if let Some(s) = self.nodes.get_mut(&node) {
            s.state = ConnectionState::AuthFailed;
        }
    }

    pub fn touch(&mut self, node: i32, now_ms: i64) {
        if let Some(s) = self.nodes.get_mut(&node) {
            s.last_activity_ms = now_ms;
        }
    }

    /// Connected nodes idle for longer than `max_idle_ms`.
    pub fn idle_nodes(&self, now_ms: i64, max_idle_ms: i64) -> Vec<i32> {
        let mut v: Vec<i32> = self
            .nodes
            .iter()
            .filter(|(_, s)| {
                s.state == ConnectionState::Ready && now_ms - s.last_activity_ms > max_idle_ms
            })
            .map(|(n, _)| *n)
            .collect();
        v.sort_unstable();
        v
    }

    pub fn current_backoff(&self, node: i32) -> Option<i64> {
        self.nodes.get(&node).map(|s| s.reconnect_backoff_ms)
    }

    pub fn remove(&mut self, node: i32) {
        self.nodes.remove(&node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConnectionState::*;

    #[test]
    fn lifecycle_and_backoff_without_jitter() {
        let mut s = ClusterConnectionStates::new(50, 1000, 1);
        s.set_jitter(0.0);
        assert_eq!(s.state(1), Disconnected);
        assert!(s.can_connect(1, 0));
        s.connecting(1, 0);
        assert_eq!(s.state(1), Connecting);
        assert!(!s.can_connect(1, 10_000));
        s.disconnected(1, 0);
        // 1st failure: base; then doubling; capped at max.
        assert_eq!(s.current_backoff(1), Some(50));
        assert!(s.is_blacked_out(1, 49));
        assert!(!s.can_connect(1, 49));
        assert_eq!(s.connection_delay(1, 20), 30);
        assert!(s.can_connect(1, 50));
        let mut expect = vec![];
        for i in 0..6 {
            s.connecting(1, i * 10_000);
            s.disconnected(1, i * 10_000);
            expect.push(s.current_backoff(1).unwrap());
        }
        assert_eq!(expect, vec![100, 200, 400, 800, 1000, 1000]);
        // READY resets to the base.
        s.connecting(1, 100_000);
        s.checking_api_versions(1, 100_001);
        assert_eq!(s.state(1), CheckingApiVersions);
        assert!(s.is_connecting_or_connected(1));
        s.ready(1, 100_002);
        assert!(s.is_ready(1));
        assert_eq!(s.connection_delay(1, 100_003), i64::MAX);
        s.disconnected(1, 200_000);
        assert_eq!(s.current_backoff(1), Some(50));
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let mut s = ClusterConnectionStates::new(100, 10_000, 42);
        let mut seen = std::collections::HashSet::new();
        for failures in 1..=10u32 {
            for _ in 0..200 {
                let b = s.backoff_for(failures);
                let nominal = (100f64 * 2f64.powi(failures as i32 - 1)).min(10_000.0);
                assert!(
                    b as f64 >= nominal * 0.8 - 1.0 && b as f64 <= nominal * 1.2 + 1.0,
                    "{failures}: {b}"
                );
                seen.insert(b);
            }
        }
        assert!(seen.len() > 50, "jitter actually varies");
    }

    #[test]
    fn idle_connections() {
        let mut s = ClusterConnectionStates::new(50, 1000, 1);
        s.connecting(1, 0);
        s.ready(1, 0);
        s.connecting(2, 0);
        s.ready(2, 0);
        s.touch(2, 500);
        assert_eq!(s.idle_nodes(1001, 1000), vec![1]);
        assert_eq!(s.idle_nodes(1501, 1000), vec![1, 2]);
    }
}
