//! `send_many`, the batch path of `send_batch`: one closed check, one
//! metadata wait and one timestamp for the call, records appended under
//! one lock hold per `SEND_MANY_CHUNK` records or `SEND_MANY_CHUNK_BYTES`,
//! runs of records going to the same open batch appended without the
//! per-record partition choice.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::Instant;

use super::{Producer, SEND_MANY_CHUNK, SEND_MANY_CHUNK_BYTES, SEND_MANY_SLICE};
use crate::blocking::now_ms;
use crate::error::Error;
use crate::producer::accumulator::RecordRef;
use crate::producer::core::TopicInfo;
use crate::producer::partitioner::Partitioner;
use crate::producer::runner::{self, Completion, Core, RecordHandle};
use crate::producer::sender::EncodableBatch;

impl<B: EncodableBatch + Send + 'static, C: Completion> Producer<B, C> {
    /// Append `n` records of one topic (key and value of record `i` from
    /// `record(i)`, completion from `completion(i)`), the batch path of
    /// `send_batch`. One closed check, one metadata wait and one timestamp
    /// for the call; the state lock is taken once per `SEND_MANY_CHUNK`
    /// records instead of once per record. Returns the records that could
    /// not be enqueued with their error and completion (an invalid
    /// `partition` fails them all with `Error::Config`).
    pub fn send_many<'a>(
        &self,
        topic: &str,
        partition: Option<i32>,
        n: usize,
        record: impl Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>),
        completion: impl FnMut(usize) -> C,
        completion_run: Option<&mut dyn FnMut(usize, usize) -> C>,
    ) -> Vec<(Error, C)> {
        self.send_many_until(
            topic,
            partition,
            n,
            record,
            completion,
            completion_run,
            self.block_deadline(),
            &|| false,
        )
    }

    /// `send_many` with the deadline and interrupt check of `send_until`.
    /// On `Error::Interrupted` or a non-blocking `Error::Timeout` from the
    /// metadata wait, every record is handed back and none was enqueued.
    ///
    /// `completion_run(i, k)`, if given, makes one completion standing for
    /// records `i..i + k` of the call (which `completion` then never makes
    /// one for): records of the call that follow each other into one batch
    /// get one handle, made once (`RecordAccumulator::extend_open`). Only
    /// for completions that keep the records' sizes themselves: a run's
    /// handle is stamped with the call's timestamp and no sizes.
    #[allow(clippy::too_many_arguments)]
    pub fn send_many_until<'a>(
        &self,
        topic: &str,
        partition: Option<i32>,
        n: usize,
        record: impl Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>),
        mut completion: impl FnMut(usize) -> C,
        completion_run: Option<&mut dyn FnMut(usize, usize) -> C>,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Vec<(Error, C)> {
        let nonblocking = deadline <= Instant::now();
        let mut failed = Vec::new();
        let fail_all =
            |e: Error, completion: &mut dyn FnMut(usize) -> C, failed: &mut Vec<(Error, C)>| {
                for i in 0..n {
                    failed.push((e.clone(), completion(i)));
                }
            };
        let now = now_ms();
        if self.shared.closing.load(Ordering::Acquire) {
            fail_all(
                Error::Closed { what: "producer" },
                &mut completion,
                &mut failed,
            );
        } else {
            match self.wait_on_metadata(topic, now, deadline, interrupted) {
                Err(e) => fail_all(e, &mut completion, &mut failed),
                Ok((num_partitions, _))
                    if partition.is_some_and(|p| p < 0 || p as usize >= num_partitions) =>
                {
                    // Checked once for the call (the append path would refuse
                    // every record alike).
                    let p = partition.unwrap_or(-1);
                    let e = Error::Config {
                        key: "partition".into(),
                        detail: format!(
                            "{p} is not in the range [0...{}] of topic {topic}",
                            num_partitions - 1
                        ),
                    };
                    fail_all(e, &mut completion, &mut failed);
                }
                Ok((num_partitions, available)) => self.append_many(
                    topic,
                    partition,
                    TopicInfo {
                        num_partitions,
                        available: &available,
                    },
                    n,
                    &record,
                    &mut completion,
                    completion_run,
                    &mut failed,
                    now,
                    deadline,
                    interrupted,
                ),
            }
        }
        // Records a non-blocking call hands back for a later attempt (or an
        // interrupted call gives back) are not failed records.
        let errored = failed
            .iter()
            .filter(|(e, _)| {
                !matches!(e, Error::Timeout { .. } | Error::Interrupted) || !nonblocking
            })
            .count();
        if errored > 0 {
            self.shared
                .stats
                .records_errored
                .fetch_add(errored as u64, Ordering::Relaxed);
        }
        failed
    }

    /// The appends of `send_many_until`, under the state lock (released
    /// every `SEND_MANY_CHUNK` records: answers and draining wait on it).
    /// After each record the call's next records that go to the same open
    /// batch take the run path (`ProducerCore::extend_run`). Keyed records
    /// whose partition only the key decides go partition by partition
    /// (`key_plan`), each partition's records in call order, so they form
    /// runs too: the order Kafka keeps is per partition (docs/semantics.md
    /// §5.7), and every record lands in the partition it would record by
    /// record, in the same order within it.
    ///
    /// Generic over the record and completion sources down to the
    /// accumulator's loop (`extend_open`): per record, `dyn` calls through
    /// each layer were a large part of the batch path's cost (issue 17).
    #[allow(clippy::too_many_arguments)]
    fn append_many<'a, R, F>(
        &self,
        topic: &str,
        partition: Option<i32>,
        info: TopicInfo<'_>,
        n: usize,
        record: &R,
        completion: &mut F,
        completion_run: Option<&mut dyn FnMut(usize, usize) -> C>,
        failed: &mut Vec<(Error, C)>,
        now: i64,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) where
        R: Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>),
        F: FnMut(usize) -> C,
    {
        let plan = match partition {
            None if n > 1 && info.num_partitions > 1 => {
                key_plan(self.shared.cfg.partitioner, n, record, info.num_partitions)
            }
            _ => None,
        };
        let mut pass = Pass {
            appended: 0,
            wake: false,
            held: 0,
            held_bytes: 0,
            failed: Vec::new(),
        };
        let mut st = self.lock();
        self.shared.handover.begin();
        let call = Call {
            topic,
            info,
            record,
            now,
            deadline,
            interrupted,
        };
        match &plan {
            None => {
                // Positions are the call's indices here: a run of them is a
                // run of the call's records.
                let mut run = completion_run.map(|make| {
                    move |r: Range<usize>| RecordHandle::run(make(r.start, r.len()), now)
                });
                st = self
                    .append_range(
                        st,
                        &call,
                        partition,
                        0..n,
                        |q| q,
                        completion,
                        run.as_mut()
                            .map(|f| f as &mut dyn FnMut(Range<usize>) -> RecordHandle<C>),
                        &mut pass,
                    )
                    .0;
            }
            Some(plan) => {
                let index = |q: usize| plan.order[q];
                for (b, (p, positions)) in plan.buckets.iter().enumerate() {
                    let (g, stopped) = self.append_range(
                        st,
                        &call,
                        Some(*p),
                        positions.clone(),
                        index,
                        completion,
                        None,
                        &mut pass,
                    );
                    st = g;
                    if let Some(e) = stopped {
                        // Out of time: every record not appended goes back.
                        for (_, rest) in &plan.buckets[b + 1..] {
                            for q in rest.clone() {
                                let i = index(q);
                                pass.failed.push((i, e.clone(), completion(i)));
                            }
                        }
                        break;
                    }
                }
            }
        }
        self.shared
            .pending
            .fetch_add(pass.appended, Ordering::AcqRel);
        let handed = runner::end_hold(&self.shared, &mut st);
        drop(st);
        if pass.wake {
            self.wake();
        }
        runner::carry_out(&self.shared, handed, now_ms());
        // Handed back in call order, as a caller that retries them expects.
        pass.failed.sort_by_key(|(i, _, _)| *i);
        failed.extend(pass.failed.into_iter().map(|(_, e, c)| (e, c)));
    }

    /// Append the records at `positions` (record `index(q)` at position
    /// `q`) to `partition` (`None`: the partitioner's choice per record).
    /// Returns the error of a timeout that stopped it; the records from
    /// the one that timed out on are then in `pass.failed`.
    #[allow(clippy::too_many_arguments)]
    fn append_range<'g, 'a, R, F>(
        &'g self,
        mut st: MutexGuard<'g, Core<B, C>>,
        r: &Call<'_, 'a, '_, R>,
        partition: Option<i32>,
        positions: Range<usize>,
        index: impl Fn(usize) -> usize + Copy,
        completion: &mut F,
        mut run: Option<&mut (dyn FnMut(Range<usize>) -> RecordHandle<C> + '_)>,
        pass: &mut Pass<C>,
    ) -> (MutexGuard<'g, Core<B, C>>, Option<Error>)
    where
        R: Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>),
        F: FnMut(usize) -> C,
    {
        let (topic, info, now) = (r.topic, r.info, r.now);
        let record = r.record;
        // The record at position `x`, as both append paths take it.
        let at = |x: usize| {
            let (key, value) = record(index(x));
            RecordRef {
                timestamp_ms: now,
                key,
                value,
                headers: &[],
            }
        };
        let mut q = positions.start;
        while q < positions.end {
            let i = index(q);
            let rec = at(q);
            let handle = RecordHandle::new(completion(i), now, rec.key, rec.value);
            let (g, result) = self.append_waiting(
                st,
                topic,
                partition,
                info,
                &rec,
                handle,
                now,
                &mut pass.appended,
                r.deadline,
                r.interrupted,
            );
            st = g;
            q += 1;
            pass.held += 1;
            match result {
                Ok(w) => {
                    pass.wake |= w;
                    let end = positions.end.min(
                        q + SEND_MANY_CHUNK
                            .saturating_sub(pass.held)
                            .min(SEND_MANY_SLICE),
                    );
                    pass.held_bytes += record_bytes(&rec);
                    let bytes_left = SEND_MANY_CHUNK_BYTES.saturating_sub(pass.held_bytes);
                    if q < end && bytes_left > 0 {
                        let ext = st.extend_run(
                            topic,
                            partition,
                            &rec,
                            q..end,
                            at,
                            |x, r| RecordHandle::new(completion(index(x)), now, r.key, r.value),
                            run.as_deref_mut(),
                            bytes_left,
                        );
                        pass.appended += ext.appended;
                        pass.wake |= ext.became_sendable;
                        pass.held += ext.appended;
                        pass.held_bytes += ext.bytes;
                        q += ext.appended;
                    }
                }
                Err((e @ Error::Timeout { .. }, c)) => {
                    // Out of time (or a non-blocking call) and the buffer is
                    // full: this record and all after it go back.
                    pass.failed.push((i, e.clone(), c));
                    for x in q..positions.end {
                        let j = index(x);
                        pass.failed.push((j, e.clone(), completion(j)));
                    }
                    return (st, Some(e));
                }
                Err((e, c)) => pass.failed.push((i, e, c)),
            }
            // At most once a slice, however many partitions the call's
            // records go to: a step looks at every partition.
            let due = pass.held >= SEND_MANY_SLICE && (pass.wake || self.shared.handover.wanted());
            if pass.held >= SEND_MANY_CHUNK || pass.held_bytes >= SEND_MANY_CHUNK_BYTES || due {
                // Bound the lock hold, and do what other threads left to
                // this call (answers, a step) with the lock let go for
                // their completions and requests; a batch this call made
                // sendable is stepped here too, not left to the runner,
                // which would wait for the lock (handover.rs).
                let mut handed = runner::end_hold(&self.shared, &mut st);
                handed.step |= std::mem::take(&mut pass.wake);
                st = self.carry_out_and_relock(st, handed, &mut pass.appended);
                pass.held = 0;
                pass.held_bytes = 0;
            }
        }
        (st, None)
    }
}

/// A record's bytes as the lock-hold bound counts them (its key and value;
/// the run path counts encoded bytes, a few more).
fn record_bytes(r: &RecordRef<'_>) -> usize {
    r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len)
}

/// What one `append_many` pass carries across its ranges.
struct Pass<C> {
    /// Appended under the current lock hold, not yet in `pending`.
    appended: usize,
    /// The runner should step once the lock is released.
    wake: bool,
    /// Records handled since the lock was taken, and their bytes.
    held: usize,
    held_bytes: usize,
    /// (index in the call, error, completion) of the records not enqueued.
    failed: Vec<(usize, Error, C)>,
}

/// The arguments of a `send_many` call that every `append_range` shares.
struct Call<'t, 'a, 'f, R>
where
    R: Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>),
{
    topic: &'t str,
    info: TopicInfo<'t>,
    record: &'f R,
    now: i64,
    deadline: Instant,
    interrupted: &'f dyn Fn() -> bool,
}

/// A keyed call, partition by partition: `order[q]` is the record at
/// position `q`; each bucket is a partition and its positions, records in
/// call order.
struct KeyPlan {
    order: Vec<usize>,
    buckets: Vec<(i32, Range<usize>)>,
}

/// The plan of a call whose every record's partition its key decides
/// (`Partitioner::hash_partition`), else `None` (a record without a key, or
/// a partitioner that chooses by the cluster's state): a stable counting
/// sort by partition.
fn key_plan<'a>(
    kind: Partitioner,
    n: usize,
    record: &dyn Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>),
    num_partitions: usize,
) -> Option<KeyPlan> {
    let mut parts = Vec::with_capacity(n);
    let mut counts = vec![0usize; num_partitions];
    for i in 0..n {
        let p = kind.hash_partition(record(i).0, num_partitions)?;
        counts[p as usize] += 1;
        parts.push(p as usize);
    }
    let mut next = Vec::with_capacity(num_partitions);
    let mut buckets = Vec::new();
    let mut at = 0;
    for (p, &c) in counts.iter().enumerate() {
        next.push(at);
        if c > 0 {
            buckets.push((p as i32, at..at + c));
        }
        at += c;
    }
    let mut order = vec![0; n];
    for (i, p) in parts.into_iter().enumerate() {
        order[next[p]] = i;
        next[p] += 1;
    }
    Some(KeyPlan { order, buckets })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer::partitioner::partition_for_key;

    #[test]
    fn key_plan_orders_by_partition_keeping_call_order() {
        let keys: Vec<Vec<u8>> = (0..50).map(|i| format!("key-{i}").into_bytes()).collect();
        let record = |i: usize| (Some(&keys[i][..]), None);
        let plan = key_plan(Partitioner::Murmur2, keys.len(), &record, 3).unwrap();
        let mut seen: Vec<usize> = plan.order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..50).collect::<Vec<_>>(), "every record once");
        for (p, positions) in &plan.buckets {
            let idx = &plan.order[positions.clone()];
            assert!(idx.windows(2).all(|w| w[0] < w[1]), "call order in {p}");
            assert!(idx.iter().all(|&i| partition_for_key(&keys[i], 3) == *p));
        }
        assert_eq!(plan.buckets.iter().map(|(_, r)| r.len()).sum::<usize>(), 50);
        // An unkeyed record (sticky) or a state-dependent partitioner: no plan.
        let some_unkeyed = |i: usize| (if i == 7 { None } else { Some(&keys[i][..]) }, None);
        assert!(key_plan(Partitioner::Murmur2, 50, &some_unkeyed, 3).is_none());
        assert!(key_plan(Partitioner::Random, 50, &record, 3).is_none());
        assert!(key_plan(Partitioner::RoundRobin, 50, &record, 3).is_none());
    }
}
