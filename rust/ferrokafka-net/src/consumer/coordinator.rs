//! Client side of the classic consumer-group protocol (Java
//! `AbstractCoordinator` + `ConsumerCoordinator`), as a sans-IO state machine.
//!
//! The driver (tokio task) asks `next_action(now)` what to send, sends it, and
//! feeds the answer back through `on_*`. Every error code of Join, Sync,
//! Heartbeat and OffsetCommit is mapped to one `Reaction` in one table per
//! API, so the handling is testable without a broker and readable in one place.

use crate::cluster::Node;
use crate::consumer::group::MemberState;
use crate::consumer::heartbeat::Heartbeat;

/// Kafka error codes: the one table in the protocol crate.
pub use ferrokafka_protocol::codes;

/// What an error code means for the member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    Ok,
    /// Retry the same request after the retry backoff.
    Retry,
    /// The coordinator moved or is down: forget it, rediscover, retry.
    CoordinatorUnknown,
    /// Join again (keep member id and generation: a plain rebalance).
    Rejoin,
    /// Our member id is no longer valid (UNKNOWN_MEMBER_ID): reset member id
    /// and generation, then join as a new member.
    ResetAndRejoin,
    /// Our generation is no longer valid (ILLEGAL_GENERATION) but the member
    /// id still is: reset the generation only and join with the same member
    /// id. Java since KAFKA-13419 (3.2): dropping the member id here makes the
    /// broker keep the old id as a member that never rejoins, so every
    /// rebalance waits for it until its session expires and the group counts
    /// one ghost per such error (seen with the mock cluster: rebalances of a
    /// few members took 15+ s and went round in circles).
    ResetGeneration,
    /// JoinGroup v4+: the broker assigned a member id; join again at once.
    RejoinWithMemberId,
    /// Stop: the error goes to the user (and the consumer stays failed for
    /// fencing / authorization).
    Fatal(i16),
    /// An error the protocol does not expect here (INVALID_REQUEST, an
    /// unknown server error): the user sees it once, from poll, and the
    /// member joins again after the retry backoff. Java raises "Unexpected
    /// error in join/sync group response" and rejoins on the next poll; it
    /// does not give the group up. (librdkafka's mock answers a SyncGroup
    /// that arrives after the leader's with INVALID_REQUEST.)
    RaiseAndRejoin(i16),
    /// Offset commit only: this commit failed, the group is fine.
    CommitFailed(i16),
}

pub fn join_reaction(code: i16) -> Reaction {
    use codes::*;
    match code {
        NONE => Reaction::Ok,
        COORDINATOR_LOAD_IN_PROGRESS | REBALANCE_IN_PROGRESS => Reaction::Retry,
        UNKNOWN_MEMBER_ID => Reaction::ResetAndRejoin,
        COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR | REQUEST_TIMED_OUT => {
            Reaction::CoordinatorUnknown
        }
        MEMBER_ID_REQUIRED => Reaction::RejoinWithMemberId,
        // FENCED_INSTANCE_ID: another process runs with our group.instance.id.
        // The rest are configuration errors that retrying cannot fix.
        FENCED_INSTANCE_ID
        | GROUP_AUTHORIZATION_FAILED
        | INCONSISTENT_GROUP_PROTOCOL
        | INVALID_GROUP_ID
        | INVALID_SESSION_TIMEOUT
        | GROUP_MAX_SIZE_REACHED
        | UNSUPPORTED_VERSION => Reaction::Fatal(code),
        _ => Reaction::RaiseAndRejoin(code),
    }
}

pub fn sync_reaction(code: i16) -> Reaction {
    use codes::*;
    match code {
        NONE => Reaction::Ok,
        REBALANCE_IN_PROGRESS => Reaction::Rejoin,
        UNKNOWN_MEMBER_ID => Reaction::ResetAndRejoin,
        ILLEGAL_GENERATION => Reaction::ResetGeneration,
        COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR | REQUEST_TIMED_OUT => {
            Reaction::CoordinatorUnknown
        }
        FENCED_INSTANCE_ID
        | GROUP_AUTHORIZATION_FAILED
        | INCONSISTENT_GROUP_PROTOCOL
        | UNSUPPORTED_VERSION => Reaction::Fatal(code),
        _ => Reaction::RaiseAndRejoin(code),
    }
}

pub fn heartbeat_reaction(code: i16) -> Reaction {
    use codes::*;
    match code {
        NONE => Reaction::Ok,
        REBALANCE_IN_PROGRESS => Reaction::Rejoin,
        UNKNOWN_MEMBER_ID => Reaction::ResetAndRejoin,
        ILLEGAL_GENERATION => Reaction::ResetGeneration,
        COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR | REQUEST_TIMED_OUT => {
            Reaction::CoordinatorUnknown
        }
        COORDINATOR_LOAD_IN_PROGRESS => Reaction::Retry,
        _ => Reaction::Fatal(code),
    }
}

/// Per-partition OffsetCommit error codes.
pub fn commit_reaction(code: i16) -> Reaction {
    use codes::*;
    match code {
        NONE => Reaction::Ok,
        COORDINATOR_LOAD_IN_PROGRESS | UNKNOWN_TOPIC_OR_PARTITION => Reaction::Retry,
        COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR | REQUEST_TIMED_OUT => {
            Reaction::CoordinatorUnknown
        }
        // The generation moved on: this commit is lost (Java CommitFailedException);
        // the member rejoins and its partitions may belong to someone else now.
        UNKNOWN_MEMBER_ID => Reaction::ResetAndRejoin,
        ILLEGAL_GENERATION => Reaction::ResetGeneration,
        // KIP-848 (docs/semantics.md §6.4, §6.5): the member epoch is no longer valid (fenced); a stale
        // epoch only fails this commit (the member's next heartbeat catches up).
        FENCED_MEMBER_EPOCH => Reaction::ResetAndRejoin,
        REBALANCE_IN_PROGRESS | STALE_MEMBER_EPOCH => Reaction::CommitFailed(code),
        OFFSET_METADATA_TOO_LARGE | INVALID_COMMIT_OFFSET_SIZE | TOPIC_AUTHORIZATION_FAILED => {
            Reaction::CommitFailed(code)
        }
        GROUP_AUTHORIZATION_FAILED | FENCED_INSTANCE_ID => Reaction::Fatal(code),
        _ => Reaction::CommitFailed(code),
    }
}

/// OffsetFetch errors: UNSTABLE_OFFSET_COMMIT (a transaction is pending on the
/// partition) and coordinator loading are retried.
pub fn offset_fetch_reaction(code: i16) -> Reaction {
    use codes::*;
    match code {
        NONE => Reaction::Ok,
        COORDINATOR_LOAD_IN_PROGRESS | UNSTABLE_OFFSET_COMMIT => Reaction::Retry,
        COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR | REQUEST_TIMED_OUT => {
            Reaction::CoordinatorUnknown
        }
        _ => Reaction::Fatal(code),
    }
}

pub const NO_GENERATION: i32 = -1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    pub generation_id: i32,
    pub member_id: String,
    pub protocol_name: Option<String>,
}

impl Generation {
    pub fn none() -> Self {
        Generation {
            generation_id: NO_GENERATION,
            member_id: String::new(),
            protocol_name: None,
        }
    }
}

/// What the driver should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send FindCoordinator (key = group id) to the least-loaded node.
    FindCoordinator,
    /// Send JoinGroup with this member id.
    Join { member_id: String },
    /// Send a Heartbeat for this generation.
    Heartbeat { generation: Generation },
    /// max.poll.interval.ms passed without poll: leave so partitions move.
    LeaveForPollTimeout,
    /// Nothing due; call again within this many ms.
    Wait(i64),
}

/// Membership state (no subscription or offsets: those are the consumer's).
#[derive(Debug)]
pub struct GroupMembership {
    pub group_id: String,
    pub group_instance_id: Option<String>,
    pub rebalance_timeout_ms: i64,
    pub retry_backoff_ms: i64,
    state: MemberState,
    generation: Generation,
    coordinator: Option<Node>,
    rejoin_needed: bool,
    rejoin_reason: String,
    /// A request whose answer we are waiting for (find / join / sync);
    /// heartbeats are tracked by `heartbeat` itself.
    pending: bool,
    /// Earliest time the next find/join may go out (after a failure).
    next_attempt_ms: i64,
    fatal: Option<i16>,
    pub heartbeat: Heartbeat,
}

impl GroupMembership {
    pub fn new(
        group_id: String,
        group_instance_id: Option<String>,
        session_timeout_ms: i64,
        heartbeat_interval_ms: i64,
        max_poll_interval_ms: i64,
        retry_backoff_ms: i64,
        now_ms: i64,
    ) -> Self {
        GroupMembership {
            group_id,
            group_instance_id,
            rebalance_timeout_ms: max_poll_interval_ms,
            retry_backoff_ms,
            state: MemberState::Unjoined,
            generation: Generation::none(),
            coordinator: None,
            rejoin_needed: true,
            rejoin_reason: "initial join".into(),
            pending: false,
            next_attempt_ms: 0,
            fatal: None,
            heartbeat: Heartbeat::new(
                session_timeout_ms,
                heartbeat_interval_ms,
                max_poll_interval_ms,
                retry_backoff_ms,
                now_ms,
            ),
        }
    }

    pub fn state(&self) -> MemberState {
        self.state
    }

    pub fn generation(&self) -> &Generation {
        &self.generation
    }

    pub fn coordinator(&self) -> Option<&Node> {
        self.coordinator.as_ref()
    }

    pub fn coordinator_unknown(&self) -> bool {
        self.coordinator.is_none()
    }

    pub fn rejoin_needed(&self) -> bool {
        self.rejoin_needed
    }

    pub fn rejoin_reason(&self) -> &str {
        &self.rejoin_reason
    }

    pub fn fatal(&self) -> Option<i16> {
        self.fatal
    }

    pub fn request_rejoin(&mut self, reason: impl Into<String>) {
        self.rejoin_needed = true;
        self.rejoin_reason = reason.into();
    }

    /// docs/semantics.md §2.3: an unreachable coordinator is forgotten and rediscovered.
    pub fn mark_coordinator_unknown(&mut self, reason: &str, now_ms: i64) {
        if self.coordinator.take().is_some() {
            self.rejoin_reason = format!("coordinator unknown: {reason}");
        }
        self.pending = false;
        self.next_attempt_ms = now_ms + self.retry_backoff_ms;
    }

    fn reset_generation(&mut self, reason: &str, keep_member_id: bool) {
        let member_id = std::mem::take(&mut self.generation.member_id);
        self.generation = Generation::none();
        if keep_member_id {
            self.generation.member_id = member_id;
        }
        self.state = MemberState::Unjoined;
        self.request_rejoin(reason.to_string());
    }

    fn apply(&mut self, reaction: Reaction, now_ms: i64, what: &str) {
        self.pending = false;
        match reaction {
            Reaction::Ok => {}
            Reaction::Retry => {
                self.next_attempt_ms = now_ms + self.retry_backoff_ms;
                if self.state != MemberState::Stable {
                    self.state = MemberState::Unjoined;
                }
            }
            Reaction::CoordinatorUnknown => {
                self.mark_coordinator_unknown(what, now_ms);
                if self.state != MemberState::Stable {
                    self.state = MemberState::Unjoined;
                }
            }
            Reaction::Rejoin => {
                self.request_rejoin(format!("{what}: group is rebalancing"));
                if self.state != MemberState::Stable {
                    self.state = MemberState::Unjoined;
                }
            }
            Reaction::ResetAndRejoin => {
                self.reset_generation(&format!("{what}: member id no longer valid"), false);
                self.next_attempt_ms = now_ms;
            }
            Reaction::ResetGeneration => {
                self.reset_generation(&format!("{what}: generation no longer valid"), true);
                self.next_attempt_ms = now_ms;
            }
            Reaction::RejoinWithMemberId => {
                self.state = MemberState::Unjoined;
                self.next_attempt_ms = now_ms;
            }
            Reaction::RaiseAndRejoin(code) => {
                self.request_rejoin(format!("{what}: unexpected error {code}"));
                self.state = MemberState::Unjoined;
                self.next_attempt_ms = now_ms + self.retry_backoff_ms;
            }
            Reaction::Fatal(code) | Reaction::CommitFailed(code) => {
                if matches!(reaction, Reaction::Fatal(_)) {
                    self.fatal = Some(code);
                    self.state = MemberState::Unjoined;
                }
            }
        }
    }

    /// What to do now. The consumer's poll calls this; the answer drives I/O.
    pub fn next_action(&mut self, now_ms: i64) -> Action {
        if self.fatal.is_some() || self.pending {
            return Action::Wait(self.retry_backoff_ms);
        }
        if now_ms < self.next_attempt_ms {
            return Action::Wait(self.next_attempt_ms - now_ms);
        }
        if self.coordinator.is_none() {
            self.pending = true;
            return Action::FindCoordinator;
        }
        if self.state == MemberState::Stable {
            if self.heartbeat.poll_timeout_expired(now_ms) {
                return Action::LeaveForPollTimeout;
            }
            if self.heartbeat.session_timeout_expired(now_ms) {
                // No heartbeat got through for a whole session: the
                // coordinator has evicted us or is gone.
                self.mark_coordinator_unknown(
                    "session timed out without a heartbeat answer",
                    now_ms,
                );
                return Action::FindCoordinator;
            }
        }
        if self.rejoin_needed
            && self.state != MemberState::PreparingRebalance
            && self.state != MemberState::CompletingRebalance
        {
            self.state = MemberState::PreparingRebalance;
            self.pending = true;
            return Action::Join {
                member_id: self.generation.member_id.clone(),
            };
        }
        if self.state == MemberState::Stable && self.heartbeat.should_heartbeat(now_ms) {
            self.heartbeat.sent_heartbeat(now_ms);
            return Action::Heartbeat {
                generation: self.generation.clone(),
            };
        }
        Action::Wait(self.heartbeat.time_to_next_heartbeat(now_ms).max(1))
    }

    /// The generation to heartbeat for, when a heartbeat is due, for a
    /// stable member whose rejoin waits (the application has not taken its
    /// revocation yet). `next_action` would answer `Join` instead, since a
    /// rejoin is needed, and the join must not start before that.
    pub fn heartbeat_while_rejoin_waits(&mut self, now_ms: i64) -> Option<Generation> {
        let due = self.fatal.is_none()
            && !self.pending
            && self.coordinator.is_some()
            && self.state == MemberState::Stable
            && self.heartbeat.should_heartbeat(now_ms);
        if !due {
            return None;
        }
        self.heartbeat.sent_heartbeat(now_ms);
        Some(self.generation.clone())
    }

    pub fn on_find_coordinator(&mut self, result: Result<Node, i16>, now_ms: i64) {
        self.pending = false;
        match result {
            Ok(node) => self.coordinator = Some(node),
            Err(code) => {
                // COORDINATOR_NOT_AVAILABLE while __consumer_offsets is being
                // created is retriable (docs/semantics.md §2.5); so is every other
                // discovery failure except authorization.
                if code == codes::GROUP_AUTHORIZATION_FAILED {
                    self.fatal = Some(code);
                }
                self.next_attempt_ms = now_ms + self.retry_backoff_ms;
            }
        }
    }

    /// JoinGroup answered. On success returns whether we are the leader.
    pub fn on_join(
        &mut self,
        code: i16,
        generation_id: i32,
        member_id: &str,
        leader_id: &str,
        protocol_name: Option<&str>,
        now_ms: i64,
    ) -> Reaction {
        if self.state != MemberState::PreparingRebalance {
            // A stale answer (we left or reset meanwhile): ignore it.
            self.pending = false;
            return Reaction::Retry;
        }
        let r = join_reaction(code);
        match r {
            Reaction::Ok => {
                self.generation = Generation {
                    generation_id,
                    member_id: member_id.to_string(),
                    protocol_name: protocol_name.map(str::to_string),
                };
                self.state = MemberState::CompletingRebalance;
                // SyncGroup follows at once; keep `pending` for it.
                self.pending = true;
                let _ = leader_id;
            }
            Reaction::RejoinWithMemberId => {
                self.generation.member_id = member_id.to_string();
                self.apply(r, now_ms, "join");
            }
            _ => self.apply(r, now_ms, "join"),
        }
        r
    }

    pub fn is_leader(&self, leader_id: &str) -> bool {
        !self.generation.member_id.is_empty() && self.generation.member_id == leader_id
    }

    pub fn on_sync(&mut self, code: i16, now_ms: i64) -> Reaction {
        let r = sync_reaction(code);
        if r == Reaction::Ok {
            self.pending = false;
            self.state = MemberState::Stable;
            self.rejoin_needed = false;
            self.rejoin_reason.clear();
            self.heartbeat.reset_timeouts(now_ms);
        } else {
            self.apply(r, now_ms, "sync");
        }
        r
    }

    pub fn on_heartbeat(&mut self, result: Result<i16, ()>, now_ms: i64) -> Reaction {
        let code = match result {
            Ok(code) => code,
            Err(()) => {
                // Transport failure: retry soon; the session timer decides
                // when the coordinator is considered lost.
                self.heartbeat.fail_heartbeat(now_ms);
                return Reaction::Retry;
            }
        };
        let r = heartbeat_reaction(code);
        match r {
            Reaction::Ok => self.heartbeat.received_heartbeat(now_ms),
            Reaction::Rejoin => {
                // Still a member until the rejoin completes: the session lives.
                self.heartbeat.received_heartbeat(now_ms);
                self.request_rejoin("heartbeat: group is rebalancing");
                self.state = MemberState::Unjoined;
            }
            Reaction::Retry => self.heartbeat.fail_heartbeat(now_ms),
            _ => {
                self.heartbeat.fail_heartbeat(now_ms);
                let keep_pending = self.pending;
                self.apply(r, now_ms, "heartbeat");
                self.pending = keep_pending && !matches!(r, Reaction::CoordinatorUnknown);
            }
        }
        r
    }

    /// The application polled: the poll timer restarts.
    pub fn on_poll(&mut self, now_ms: i64) {
        self.heartbeat.poll(now_ms);
    }

    /// LeaveGroup sent (close, unsubscribe, poll timeout): back to unjoined.
    /// Static members keep their member id semantics on the broker, but we
    /// drop our generation either way.
    /// A commit or heartbeat answer said our generation or member id is no
    /// longer valid: reset (keeping the member id for ILLEGAL_GENERATION).
    pub fn on_generation_error(&mut self, r: Reaction, what: &str) {
        match r {
            Reaction::ResetGeneration => {
                self.reset_generation(&format!("{what}: generation no longer valid"), true)
            }
            _ => self.reset_generation(&format!("{what}: member id no longer valid"), false),
        }
        self.pending = false;
    }

    /// Under KIP-848 this membership only finds the coordinator; the
    /// generation mirrors the member (`member::ConsumerMember`) so commits
    /// carry its id and epoch, and it is Stable while the member has an
    /// epoch. No JoinGroup is ever wanted.
    pub fn adopt_consumer_member(&mut self, member_id: String, epoch: i32) {
        self.generation = Generation {
            generation_id: epoch,
            member_id,
            protocol_name: None,
        };
        self.state = if epoch > 0 {
            MemberState::Stable
        } else {
            MemberState::Unjoined
        };
        self.rejoin_needed = false;
    }

    pub fn on_leave(&mut self, reason: &str) {
        self.generation = Generation::none();
        self.state = MemberState::Unjoined;
        self.pending = false;
        self.request_rejoin(reason.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(now: i64) -> GroupMembership {
        GroupMembership::new("g".into(), None, 10_000, 3_000, 300_000, 100, now)
    }

    fn coordinator() -> Node {
        Node::new(1, "127.0.0.1", 9092, None)
    }

    fn join_and_sync(m: &mut GroupMembership, now: i64) {
        assert_eq!(m.next_action(now), Action::FindCoordinator);
        m.on_find_coordinator(Ok(coordinator()), now);
        assert_eq!(
            m.next_action(now),
            Action::Join {
                member_id: String::new()
            }
        );
        assert_eq!(
            m.on_join(codes::MEMBER_ID_REQUIRED, -1, "m-1", "", None, now),
            Reaction::RejoinWithMemberId
        );
        assert_eq!(
            m.next_action(now),
            Action::Join {
                member_id: "m-1".into()
            }
        );
        assert_eq!(
            m.on_join(0, 5, "m-1", "m-1", Some("range"), now),
            Reaction::Ok
        );
        assert!(m.is_leader("m-1"));
        assert_eq!(m.state(), MemberState::CompletingRebalance);
        assert_eq!(m.on_sync(0, now), Reaction::Ok);
        assert_eq!(m.state(), MemberState::Stable);
    }

    #[test]
    fn heartbeats_continue_while_a_rejoin_waits_for_the_application() {
        let mut m = member(0);
        join_and_sync(&mut m, 0);
        m.request_rejoin("subscription changed");
        assert_eq!(m.heartbeat_while_rejoin_waits(100), None, "not due yet");
        let g = m.heartbeat_while_rejoin_waits(3_000).expect("due");
        assert_eq!(g.generation_id, 5);
        assert_eq!(m.heartbeat_while_rejoin_waits(3_001), None, "just sent");
        // The join was neither started nor lost: it comes once asked for.
        assert_eq!(m.state(), MemberState::Stable);
        assert_eq!(
            m.next_action(3_002),
            Action::Join {
                member_id: "m-1".into()
            }
        );
    }

    #[test]
    fn discover_join_sync_heartbeat() {
        let mut m = member(0);
        join_and_sync(&mut m, 0);
        assert_eq!(m.next_action(100), Action::Wait(2_900));
        match m.next_action(3_000) {
            Action::Heartbeat { generation } => assert_eq!(generation.generation_id, 5),
            a => panic!("{a:?}"),
        }
        assert_eq!(m.on_heartbeat(Ok(0), 3_010), Reaction::Ok);
    }

    #[test]
    fn rebalance_in_progress_on_heartbeat_rejoins_with_same_member() {
        let mut m = member(0);
        join_and_sync(&mut m, 0);
        m.next_action(3_000);
        assert_eq!(
            m.on_heartbeat(Ok(codes::REBALANCE_IN_PROGRESS), 3_001),
            Reaction::Rejoin
        );
        assert_eq!(
            m.next_action(3_002),
            Action::Join {
                member_id: "m-1".into()
            }
        );
    }

    #[test]
    fn illegal_generation_resets_generation_and_keeps_member_id() {
        // KAFKA-13419: the member id is still valid, rejoin with it (a new
        // id would leave the old one behind as a ghost member).
        let mut m = member(0);
        join_and_sync(&mut m, 0);
        m.next_action(3_000);
        assert_eq!(
            m.on_heartbeat(Ok(codes::ILLEGAL_GENERATION), 3_001),
            Reaction::ResetGeneration
        );
        assert_eq!(m.generation().generation_id, NO_GENERATION);
        assert_eq!(
            m.next_action(3_002),
            Action::Join {
                member_id: "m-1".into()
            }
        );
    }

    #[test]
    fn unknown_member_id_resets_member() {
        let mut m = member(0);
        join_and_sync(&mut m, 0);
        m.next_action(3_000);
        assert_eq!(
            m.on_heartbeat(Ok(codes::UNKNOWN_MEMBER_ID), 3_001),
            Reaction::ResetAndRejoin
        );
        assert_eq!(m.generation().generation_id, NO_GENERATION);
        assert_eq!(
            m.next_action(3_002),
            Action::Join {
                member_id: String::new()
            }
        );
    }

    #[test]
    fn not_coordinator_triggers_rediscovery_after_backoff() {
        let mut m = member(0);
        join_and_sync(&mut m, 0);
        m.next_action(3_000);
        assert_eq!(
            m.on_heartbeat(Ok(codes::NOT_COORDINATOR), 3_001),
            Reaction::CoordinatorUnknown
        );
        assert!(m.coordinator_unknown());
        assert_eq!(m.next_action(3_050), Action::Wait(51));
        assert_eq!(m.next_action(3_101), Action::FindCoordinator);
    }

    #[test]
    fn session_expiry_and_poll_timeout() {
        let mut m = member(0);
        join_and_sync(&mut m, 0);
        m.on_poll(0);
        m.next_action(3_000); // heartbeat sent, never answered
        assert_eq!(m.next_action(10_001), Action::FindCoordinator);
        let mut m = member(0);
        join_and_sync(&mut m, 0);
        assert_eq!(m.next_action(300_001), Action::LeaveForPollTimeout);
    }

    #[test]
    fn fencing_is_fatal_and_coordinator_errors_are_retried() {
        assert_eq!(
            join_reaction(codes::FENCED_INSTANCE_ID),
            Reaction::Fatal(codes::FENCED_INSTANCE_ID)
        );
        assert_eq!(
            join_reaction(codes::INCONSISTENT_GROUP_PROTOCOL),
            Reaction::Fatal(23)
        );
        assert_eq!(
            join_reaction(codes::COORDINATOR_LOAD_IN_PROGRESS),
            Reaction::Retry
        );
        assert_eq!(
            sync_reaction(codes::NOT_COORDINATOR),
            Reaction::CoordinatorUnknown
        );
        assert_eq!(
            commit_reaction(codes::OFFSET_METADATA_TOO_LARGE),
            Reaction::CommitFailed(12)
        );
        assert_eq!(
            commit_reaction(codes::ILLEGAL_GENERATION),
            Reaction::ResetGeneration
        );
        assert_eq!(
            commit_reaction(codes::UNKNOWN_MEMBER_ID),
            Reaction::ResetAndRejoin
        );
        assert_eq!(
            offset_fetch_reaction(codes::UNSTABLE_OFFSET_COMMIT),
            Reaction::Retry
        );
        assert_eq!(
            join_reaction(codes::GROUP_AUTHORIZATION_FAILED),
            Reaction::Fatal(30)
        );
        assert_eq!(
            sync_reaction(codes::FENCED_INSTANCE_ID),
            Reaction::Fatal(82)
        );
        let mut m = member(0);
        m.next_action(0);
        m.on_find_coordinator(Ok(coordinator()), 0);
        m.next_action(0);
        assert_eq!(
            m.on_join(codes::FENCED_INSTANCE_ID, -1, "", "", None, 0),
            Reaction::Fatal(82)
        );
        assert_eq!(m.fatal(), Some(82));
        assert!(matches!(m.next_action(1_000), Action::Wait(_)));
    }

    #[test]
    fn unexpected_sync_error_is_raised_once_and_the_member_rejoins() {
        // INVALID_REQUEST (42) to a SyncGroup: not the member's fault and not
        // permanent. The member is not failed; it joins again after backoff
        // with its member id.
        assert_eq!(sync_reaction(42), Reaction::RaiseAndRejoin(42));
        assert_eq!(join_reaction(-1), Reaction::RaiseAndRejoin(-1));
        let mut m = member(0);
        m.next_action(0);
        m.on_find_coordinator(Ok(coordinator()), 0);
        assert!(matches!(m.next_action(0), Action::Join { .. }));
        assert_eq!(
            m.on_join(0, 3, "m-1", "leader", Some("range"), 0),
            Reaction::Ok
        );
        assert_eq!(m.on_sync(42, 10), Reaction::RaiseAndRejoin(42));
        assert_eq!(m.fatal(), None);
        assert!(
            matches!(m.next_action(20), Action::Wait(_)),
            "backs off first"
        );
        let Action::Join { member_id } = m.next_action(10 + 100) else {
            panic!("rejoins after the backoff")
        };
        assert_eq!(member_id, "m-1");
    }

    #[test]
    fn coordinator_not_available_during_discovery_is_retried() {
        let mut m = member(0);
        assert_eq!(m.next_action(0), Action::FindCoordinator);
        m.on_find_coordinator(Err(codes::COORDINATOR_NOT_AVAILABLE), 0);
        assert_eq!(m.next_action(50), Action::Wait(50));
        assert_eq!(m.next_action(100), Action::FindCoordinator);
    }
}
