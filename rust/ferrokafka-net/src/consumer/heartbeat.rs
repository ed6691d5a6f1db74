//! Group membership timers (Java `Heartbeat`), with injected time.
//!
//! Three clocks decide a member's liveness:
//! * the heartbeat timer: send a Heartbeat every `heartbeat_interval_ms`;
//! * the session timer: if no heartbeat succeeded for `session_timeout_ms`,
//!   the coordinator has surely evicted us: mark it unknown and rejoin;
//! * the poll timer: if the application did not call `poll` for
//!   `max_poll_interval_ms`, leave the group proactively (the broker would
//!   evict us on rebalance anyway) so partitions move to a live member.

#[derive(Debug, Clone)]
pub struct Heartbeat {
    session_timeout_ms: i64,
    heartbeat_interval_ms: i64,
    max_poll_interval_ms: i64,
    retry_backoff_ms: i64,
    last_heartbeat_send_ms: i64,
    last_heartbeat_receive_ms: i64,
    /// The next heartbeat is due at this time.
    heartbeat_deadline_ms: i64,
    session_deadline_ms: i64,
    poll_deadline_ms: i64,
    in_flight: bool,
}

impl Heartbeat {
    pub fn new(
        session_timeout_ms: i64,
        heartbeat_interval_ms: i64,
        max_poll_interval_ms: i64,
        retry_backoff_ms: i64,
        now_ms: i64,
    ) -> Self {
        Heartbeat {
            session_timeout_ms,
            heartbeat_interval_ms,
            max_poll_interval_ms,
            retry_backoff_ms,
            last_heartbeat_send_ms: 0,
            last_heartbeat_receive_ms: 0,
            heartbeat_deadline_ms: now_ms + heartbeat_interval_ms,
            session_deadline_ms: now_ms + session_timeout_ms,
            poll_deadline_ms: now_ms + max_poll_interval_ms,
            in_flight: false,
        }
    }

    pub fn poll(&mut self, now_ms: i64) {
        self.poll_deadline_ms = now_ms + self.max_poll_interval_ms;
    }

    pub fn sent_heartbeat(&mut self, now_ms: i64) {
        self.last_heartbeat_send_ms = now_ms;
        self.in_flight = true;
        self.heartbeat_deadline_ms = now_ms + self.heartbeat_interval_ms;
    }

    /// A failed heartbeat is retried after the retry backoff, not a whole interval.
    pub fn fail_heartbeat(&mut self, now_ms: i64) {
        self.in_flight = false;
        self.heartbeat_deadline_ms = now_ms + self.retry_backoff_ms;
    }

    pub fn received_heartbeat(&mut self, now_ms: i64) {
        self.in_flight = false;
        self.last_heartbeat_receive_ms = now_ms;
        self.session_deadline_ms = now_ms + self.session_timeout_ms;
    }

    pub fn should_heartbeat(&self, now_ms: i64) -> bool {
        !self.in_flight && now_ms >= self.heartbeat_deadline_ms
    }

    pub fn time_to_next_heartbeat(&self, now_ms: i64) -> i64 {
        if self.in_flight {
            // The answer (or its timeout) wakes us; nothing to schedule.
            return self.session_deadline_ms.saturating_sub(now_ms).max(0);
        }
        (self.heartbeat_deadline_ms - now_ms).max(0)
    }

    pub fn session_timeout_expired(&self, now_ms: i64) -> bool {
        now_ms >= self.session_deadline_ms
    }

    pub fn poll_timeout_expired(&self, now_ms: i64) -> bool {
        now_ms >= self.poll_deadline_ms
    }

    /// Time until the poll timer runs out (the application must poll by then).
    pub fn time_to_poll_deadline(&self, now_ms: i64) -> i64 {
        (self.poll_deadline_ms - now_ms).max(0)
    }

    /// Joining the group resets every timer: the session starts now.
    pub fn reset_timeouts(&mut self, now_ms: i64) {
        self.in_flight = false;
        self.session_deadline_ms = now_ms + self.session_timeout_ms;
        self.heartbeat_deadline_ms = now_ms + self.heartbeat_interval_ms;
        self.poll_deadline_ms = now_ms + self.max_poll_interval_ms;
    }

    pub fn last_heartbeat_receive_ms(&self) -> i64 {
        self.last_heartbeat_receive_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_session_and_poll_timers() {
        let mut h = Heartbeat::new(10_000, 3_000, 300_000, 100, 0);
        assert!(!h.should_heartbeat(2_999));
        assert!(h.should_heartbeat(3_000));
        h.sent_heartbeat(3_000);
        assert!(!h.should_heartbeat(6_500), "one in flight at a time");
        h.received_heartbeat(3_010);
        assert_eq!(h.time_to_next_heartbeat(3_010), 2_990);
        assert!(!h.session_timeout_expired(13_009));
        assert!(h.session_timeout_expired(13_010));
        assert!(!h.poll_timeout_expired(299_999));
        h.poll(200_000);
        assert!(!h.poll_timeout_expired(300_000));
        assert!(h.poll_timeout_expired(500_000));
    }

    #[test]
    fn failed_heartbeat_retries_after_backoff() {
        let mut h = Heartbeat::new(10_000, 3_000, 300_000, 100, 0);
        h.sent_heartbeat(3_000);
        h.fail_heartbeat(3_050);
        assert!(!h.should_heartbeat(3_149));
        assert!(h.should_heartbeat(3_150));
    }
}
