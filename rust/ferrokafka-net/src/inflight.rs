//! docs/semantics.md §4.7: the requests sent to each node and not yet answered.
//!
//! One deque per node with the *newest request at the head* (front) and the
//! oldest at the tail (back), as Java's `InFlightRequests`. Responses on a
//! Kafka connection come back in send order, so `complete_next` pops the
//! oldest; `complete_last_sent` pops the newest (acks=0 requests complete as
//! soon as their own bytes are written, and at that moment they are the
//! newest: `can_send_more` forbids a new send before the previous one is
//! fully written, so at most one unwritten request exists per node, at the head).
//!
//! Pure data structure: no clock, no I/O. Time comes in as `now_ms`.

use std::collections::{HashMap, VecDeque};

/// What the deque needs to know about an entry.
pub trait InFlight {
    /// The request's bytes have been fully handed to the socket.
    fn is_send_done(&self) -> bool;
    /// `now_ms` is past this request's deadline (send time + request timeout).
    fn is_expired(&self, now_ms: i64) -> bool;
    /// Deadline in ms (for computing how long poll may sleep).
    fn deadline_ms(&self) -> i64;
}

#[derive(Debug)]
pub struct InFlightRequests<T> {
    max_per_connection: usize,
    requests: HashMap<i32, VecDeque<T>>,
    /// Kept in step with the deques so `total_count` is O(1) (Java keeps an
    /// AtomicInteger for the same reason: it is read on every poll).
    total: usize,
}

impl<T: InFlight> InFlightRequests<T> {
    pub fn new(max_per_connection: usize) -> Self {
        InFlightRequests {
            max_per_connection: max_per_connection.max(1),
            requests: HashMap::new(),
            total: 0,
        }
    }

    /// Records a request just handed to `node`'s connection (becomes the head).
    pub fn add(&mut self, node: i32, req: T) {
        self.requests.entry(node).or_default().push_front(req);
        self.total += 1;
    }

    /// The oldest request of `node`: the one the next response answers.
    pub fn complete_next(&mut self, node: i32) -> Option<T> {
        let r = self.requests.get_mut(&node)?.pop_back();
        if r.is_some() {
            self.total -= 1;
        }
        r
    }

    /// Peek at the oldest request (to check a response's correlation id
    /// before taking it).
    pub fn oldest(&self, node: i32) -> Option<&T> {
        self.requests.get(&node)?.back()
    }

    /// The newest request of `node`.
    pub fn last_sent(&self, node: i32) -> Option<&T> {
        self.requests.get(&node)?.front()
    }

    pub fn last_sent_mut(&mut self, node: i32) -> Option<&mut T> {
        self.requests.get_mut(&node)?.front_mut()
    }

    /// Removes the newest request of `node` (acks=0 completion, docs/semantics.md §4.8).
    pub fn complete_last_sent(&mut self, node: i32) -> Option<T> {
        let r = self.requests.get_mut(&node)?.pop_front();
        if r.is_some() {
            self.total -= 1;
        }
        r
    }

    /// Empty, or the newest send finished and fewer than the cap in flight.
    pub fn can_send_more(&self, node: i32) -> bool {
        match self.requests.get(&node) {
            None => true,
            Some(q) => match q.front() {
                None => true,
                Some(head) => head.is_send_done() && q.len() < self.max_per_connection,
            },
        }
    }

    pub fn count(&self, node: i32) -> usize {
        self.requests.get(&node).map_or(0, VecDeque::len)
    }

    pub fn total_count(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self, node: i32) -> bool {
        self.count(node) == 0
    }

    /// Removes every request of `node`, oldest first (disconnection, 4.10).
    pub fn clear_all(&mut self, node: i32) -> Vec<T> {
        match self.requests.remove(&node) {
            None => Vec::new(),
            Some(q) => {
                self.total -= q.len();
                q.into_iter().rev().collect()
            }
        }
    }

    /// Nodes with at least one request past its deadline. Only the oldest
    /// request of each node needs checking for the common case of one timeout
    /// for all, but timeouts may differ per request, so look at all of them.
    pub fn nodes_with_expired_requests(&self, now_ms: i64) -> Vec<i32> {
        let mut out: Vec<i32> = self
            .requests
            .iter()
            .filter(|(_, q)| q.iter().any(|r| r.is_expired(now_ms)))
            .map(|(n, _)| *n)
            .collect();
        out.sort_unstable();
        out
    }

    /// The earliest deadline of any request, for capping poll's wait.
    pub fn earliest_deadline(&self) -> Option<i64> {
        self.requests
            .values()
            .flat_map(|q| q.iter().map(InFlight::deadline_ms))
            .min()
    }

    pub fn nodes(&self) -> impl Iterator<Item = i32> + '_ {
        self.requests
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(n, _)| *n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct R {
        id: i32,
        done: bool,
        deadline: i64,
    }
    impl InFlight for R {
        fn is_send_done(&self) -> bool {
            self.done
        }
        fn is_expired(&self, now_ms: i64) -> bool {
            now_ms > self.deadline
        }
        fn deadline_ms(&self) -> i64 {
            self.deadline
        }
    }
    fn r(id: i32, done: bool) -> R {
        R {
            id,
            done,
            deadline: 1000 + id as i64,
        }
    }

    #[test]
    fn newest_at_head_oldest_completes_next() {
        let mut q = InFlightRequests::new(5);
        for i in 1..=3 {
            q.add(1, r(i, true));
        }
        assert_eq!(q.last_sent(1).unwrap().id, 3);
        assert_eq!(q.oldest(1).unwrap().id, 1);
        assert_eq!(q.complete_next(1).unwrap().id, 1);
        assert_eq!(q.complete_last_sent(1).unwrap().id, 3);
        assert_eq!(q.complete_next(1).unwrap().id, 2);
        assert_eq!(q.complete_next(1), None);
        assert_eq!(q.total_count(), 0);
    }

    #[test]
    fn can_send_more_needs_finished_send_and_room() {
        let mut q = InFlightRequests::new(2);
        assert!(q.can_send_more(7));
        q.add(7, r(1, false));
        assert!(!q.can_send_more(7), "newest send not written yet");
        q.last_sent_mut(7).unwrap().done = true;
        assert!(q.can_send_more(7));
        q.add(7, r(2, true));
        assert!(!q.can_send_more(7), "at the cap");
        assert!(q.can_send_more(8), "other nodes unaffected");
        q.complete_next(7);
        assert!(q.can_send_more(7));
    }

    #[test]
    fn counts_per_node_and_total() {
        let mut q = InFlightRequests::new(5);
        q.add(1, r(1, true));
        q.add(2, r(2, true));
        q.add(2, r(3, true));
        assert_eq!(
            (q.count(1), q.count(2), q.count(3), q.total_count()),
            (1, 2, 0, 3)
        );
        let all = q.clear_all(2);
        assert_eq!(
            all.iter().map(|x| x.id).collect::<Vec<_>>(),
            vec![2, 3],
            "oldest first"
        );
        assert_eq!(q.total_count(), 1);
        assert!(q.is_empty(2));
    }

    #[test]
    fn expired_scan_and_earliest_deadline() {
        let mut q = InFlightRequests::new(5);
        q.add(
            1,
            R {
                id: 1,
                done: true,
                deadline: 100,
            },
        );
        q.add(
            2,
            R {
                id: 2,
                done: true,
                deadline: 300,
            },
        );
        q.add(
            2,
            R {
                id: 3,
                done: true,
                deadline: 50,
            },
        );
        assert_eq!(q.earliest_deadline(), Some(50));
        assert_eq!(q.nodes_with_expired_requests(49), Vec::<i32>::new());
        assert_eq!(q.nodes_with_expired_requests(51), vec![2]);
        assert_eq!(q.nodes_with_expired_requests(101), vec![1, 2]);
    }
}
