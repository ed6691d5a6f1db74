//! Plain data describing a cluster, shared by the network client (which nodes
//! exist) and the metadata state machine (who leads what). No I/O, no Python.
//!
//! The metadata work owns and extends this file; the network work only reads
//! `Node` and the decoded `MetadataResponse`.

use std::collections::HashMap;
use std::sync::Arc;

/// A broker as named in metadata. Bootstrap addresses get negative ids
/// (-1, -2, ...) as in the Java client, so they never collide with real ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Node {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

impl Node {
    pub fn new(id: i32, host: impl Into<String>, port: u16, rack: Option<String>) -> Self {
        Node {
            id,
            host: host.into(),
            port,
            rack,
        }
    }

    /// `host:port`, as a connection target.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: Arc<str>,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<Arc<str>>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// One partition of a Metadata answer. `leader_id` is -1 when there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub partition: i32,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline_replicas: Vec<i32>,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    pub name: String,
    pub topic_id: Option<[u8; 16]>,
    pub partitions: Vec<PartitionMetadata>,
    pub error_code: i16,
    pub is_internal: bool,
}

/// A Metadata response in our own form, independent of the wire version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetadataResponse {
    pub brokers: Vec<Node>,
    pub topics: Vec<TopicMetadata>,
    pub cluster_id: Option<String>,
    pub controller_id: i32,
}

/// Index of topic -> metadata, for lookups by name.
pub type TopicIndex = HashMap<String, TopicMetadata>;
