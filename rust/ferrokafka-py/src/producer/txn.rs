//! Argument translation for the transactional calls of `PyProducer`
//! (docs/semantics.md §7): the state machine is `ferrokafka_net::producer::txn`.

use std::collections::BTreeMap;
use std::time::Duration;

use ferrokafka_net::cluster::TopicPartition;
use ferrokafka_net::consumer::requests::OffsetAndMetadata;
use ferrokafka_net::producer::txn::GroupMetadata;
use ferrokafka_net::Error;
use pyo3::prelude::*;

use super::CoreProducer;
use crate::errors::FkError;
use crate::gil::interruptible;

/// One offset as producer.py hands it over:
/// (topic, partition, next offset, metadata, leader epoch).
pub type OffsetTuple = (String, i32, i64, Option<String>, i32);

/// (group id, generation id, member id, group instance id).
pub type GroupTuple = (String, i32, String, Option<String>);

/// Run a blocking transactional call without the GIL; Ctrl-C interrupts
/// the wait (the call itself goes on, as after a timeout).
pub fn run<F>(py: Python<'_>, core: &CoreProducer, timeout: Option<f64>, f: F) -> PyResult<()>
where
    F: FnOnce(&CoreProducer, Option<Duration>, &dyn Fn() -> bool) -> Result<(), Error> + Send,
{
    let timeout = timeout.filter(|t| *t >= 0.0).map(Duration::from_secs_f64);
    interruptible(py, |interrupted| f(core, timeout, interrupted))?.map_err(|e| FkError(e).into())
}

pub fn offsets(list: Vec<OffsetTuple>) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
    list.into_iter()
        .map(|(topic, partition, offset, metadata, leader_epoch)| {
            (
                TopicPartition::new(topic.as_str(), partition),
                OffsetAndMetadata {
                    offset,
                    leader_epoch,
                    metadata,
                },
            )
        })
        .collect()
}

pub fn group((group_id, generation_id, member_id, group_instance_id): GroupTuple) -> GroupMetadata {
    GroupMetadata {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
    }
}
