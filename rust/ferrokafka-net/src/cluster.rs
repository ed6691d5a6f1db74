//! Plain data describing a cluster, shared by the network client (which nodes
//! exist) and the metadata state machine (who leads what). No I/O, no Python.
//!
//! The metadata work owns and extends this file; the network work only reads
//! `Node` and the decoded `MetadataResponse`.

use std::collections::{BTreeSet, HashMap};

use rustc_hash::FxHashMap;
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

#[derive(Debug, Clone)]
pub struct TopicPartition {
    pub topic: Arc<str>,
    pub partition: i32,
}

// Equality and order by (topic name, partition), as derived, but two values
// sharing one name allocation (the producer hands the same `Arc` to every
// record of a topic) compare without reading the names: `send` looks its
// partition up per record.
impl PartialEq for TopicPartition {
    fn eq(&self, other: &Self) -> bool {
        self.partition == other.partition
            && (Arc::ptr_eq(&self.topic, &other.topic) || self.topic == other.topic)
    }
}

impl Eq for TopicPartition {}

// By content, as equality is (pointer-equal names have equal content).
impl std::hash::Hash for TopicPartition {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.topic.hash(state);
        self.partition.hash(state);
    }
}

impl Ord for TopicPartition {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.topic, &other.topic) {
            return self.partition.cmp(&other.partition);
        }
        (&*self.topic, self.partition).cmp(&(&*other.topic, other.partition))
    }
}

impl PartialOrd for TopicPartition {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionMetadata {
    pub partition: i32,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline_replicas: Vec<i32>,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicMetadata {
    pub name: String,
    pub topic_id: Option<[u8; 16]>,
    pub partitions: Vec<PartitionMetadata>,
    pub error_code: i16,
    pub is_internal: bool,
}

/// A Metadata response in our own form, independent of the wire version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct MetadataResponse {
    pub brokers: Vec<Node>,
    pub topics: Vec<TopicMetadata>,
    pub cluster_id: Option<String>,
    pub controller_id: i32,
}

/// Index of topic -> metadata, for lookups by name.
pub type TopicIndex = HashMap<String, TopicMetadata>;

impl PartitionMetadata {
    /// A partition entry with no error, no offline replicas.
    pub fn new(
        partition: i32,
        leader_id: i32,
        leader_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
    ) -> Self {
        PartitionMetadata {
            partition,
            leader_id,
            leader_epoch,
            replicas,
            isr,
            offline_replicas: Vec::new(),
            error_code: 0,
        }
    }
}

impl MetadataResponse {
    /// The controller as a node of this answer (None when -1 or not listed).
    pub fn controller(&self) -> Option<&Node> {
        if self.controller_id < 0 {
            return None;
        }
        self.brokers.iter().find(|n| n.id == self.controller_id)
    }
}

/// One topic as the cache holds it: partitions sorted by partition number.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicState {
    pub partitions: Vec<PartitionMetadata>,
    pub topic_id: Option<[u8; 16]>,
}

impl TopicState {
    fn get(&self, partition: i32) -> Option<&PartitionMetadata> {
        // Partitions are dense 0..n in practice, so try the direct index first
        // and fall back to a binary search for sparse/odd answers.
        match self.partitions.get(partition as usize) {
            Some(p) if p.partition == partition => Some(p),
            _ => self
                .partitions
                .binary_search_by_key(&partition, |p| p.partition)
                .ok()
                .map(|i| &self.partitions[i]),
        }
    }
}

/// An immutable snapshot of what the client knows about the cluster (Java's
/// `Cluster` + the parts of `MetadataCache` readers need). `Metadata::fetch`
/// hands out `Arc<Cluster>`: readers never lock, and an update builds a new
/// snapshot instead of mutating one somebody may be reading.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cluster {
    cluster_id: Option<String>,
    /// In the order of the answer (bootstrap: the shuffled seed order).
    nodes: Vec<Node>,
    nodes_by_id: FxHashMap<i32, Node>,
    /// Per-topic state behind an `Arc`, so a copy that changes one topic
    /// (`with_leader_unknown`) shares every other topic with the original.
    topics: FxHashMap<String, Arc<TopicState>>,
    internal_topics: BTreeSet<String>,
    invalid_topics: BTreeSet<String>,
    unauthorized_topics: BTreeSet<String>,
    controller: Option<Node>,
    is_bootstrap: bool,
}

impl Cluster {
    pub fn empty() -> Self {
        Cluster::default()
    }

    /// The seed brokers only: no topics, `is_bootstrap_configured()` true.
    pub fn bootstrap(nodes: Vec<Node>) -> Self {
        let nodes_by_id = nodes.iter().map(|n| (n.id, n.clone())).collect();
        Cluster {
            nodes,
            nodes_by_id,
            is_bootstrap: true,
            ..Cluster::default()
        }
    }

    /// Build a snapshot. `partitions` maps topic -> its partitions (any order).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cluster_id: Option<String>,
        nodes: Vec<Node>,
        partitions: HashMap<String, Vec<PartitionMetadata>>,
        topic_ids: &HashMap<String, [u8; 16]>,
        internal_topics: BTreeSet<String>,
        invalid_topics: BTreeSet<String>,
        unauthorized_topics: BTreeSet<String>,
        controller: Option<Node>,
    ) -> Self {
        let nodes_by_id: FxHashMap<i32, Node> = nodes.iter().map(|n| (n.id, n.clone())).collect();
        let topics = partitions
            .into_iter()
            .map(|(name, mut parts)| {
                parts.sort_by_key(|p| p.partition);
                let topic_id = topic_ids.get(&name).copied();
                (
                    name,
                    Arc::new(TopicState {
                        partitions: parts,
                        topic_id,
                    }),
                )
            })
            .collect();
        Cluster {
            cluster_id,
            nodes,
            nodes_by_id,
            topics,
            internal_topics,
            invalid_topics,
            unauthorized_topics,
            controller,
            is_bootstrap: false,
        }
    }

    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    pub fn node_by_id(&self, id: i32) -> Option<&Node> {
        self.nodes_by_id.get(&id)
    }
    pub fn controller(&self) -> Option<&Node> {
        self.controller.as_ref()
    }
    pub fn is_bootstrap_configured(&self) -> bool {
        self.is_bootstrap
    }
    /// Topic names with partition metadata in this snapshot.
    pub fn topics(&self) -> BTreeSet<&str> {
        self.topics.keys().map(String::as_str).collect()
    }
    pub fn topic_state(&self, topic: &str) -> Option<&TopicState> {
        self.topics.get(topic).map(|t| &**t)
    }
    pub(crate) fn topic_states(&self) -> &FxHashMap<String, Arc<TopicState>> {
        &self.topics
    }
    pub fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        self.topics.get(topic).and_then(|t| t.topic_id)
    }
    pub fn internal_topics(&self) -> &BTreeSet<String> {
        &self.internal_topics
    }
    pub fn invalid_topics(&self) -> &BTreeSet<String> {
        &self.invalid_topics
    }
    pub fn unauthorized_topics(&self) -> &BTreeSet<String> {
        &self.unauthorized_topics
    }
    /// All partitions of a topic, sorted by partition (empty if unknown).
    pub fn partitions_for_topic(&self, topic: &str) -> &[PartitionMetadata] {
        self.topics
            .get(topic)
            .map(|t| t.partitions.as_slice())
            .unwrap_or(&[])
    }
    /// Partitions whose leader is known and present among the nodes.
    pub fn available_partitions_for_topic(&self, topic: &str) -> Vec<&PartitionMetadata> {
        self.partitions_for_topic(topic)
            .iter()
            .filter(|p| p.leader_id >= 0 && self.nodes_by_id.contains_key(&p.leader_id))
            .collect()
    }
    /// Every topic but the internal ones, with its partition count (what
    /// `list_topics` answers).
    pub fn user_topic_partition_counts(&self) -> std::collections::BTreeMap<String, usize> {
        self.topics()
            .into_iter()
            .filter(|t| !self.internal_topics().contains(*t))
            .map(|t| {
                (
                    t.to_string(),
                    self.partition_count_for_topic(t).unwrap_or(0),
                )
            })
            .collect()
    }

    pub fn partition_count_for_topic(&self, topic: &str) -> Option<usize> {
        self.topics.get(topic).map(|t| t.partitions.len())
    }
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionMetadata> {
        self.topics.get(topic).and_then(|t| t.get(partition))
    }
    /// The leader node, None when unknown (-1) or not among the nodes.
    pub fn leader_for(&self, topic: &str, partition: i32) -> Option<&Node> {
        let p = self.partition(topic, partition)?;
        if p.leader_id < 0 {
            return None;
        }
        self.nodes_by_id.get(&p.leader_id)
    }
    /// The leader's id when the leader is known and among the nodes: the
    /// `leader_of` closure the accumulator and fetcher take.
    pub fn leader_id_for(&self, tp: &TopicPartition) -> Option<i32> {
        self.leader_for(&tp.topic, tp.partition).map(|n| n.id)
    }
    /// Ids of the partitions with a reachable leader: the partitioner's
    /// `available` list.
    pub fn available_partition_ids(&self, topic: &str) -> Vec<i32> {
        // One allocation, sized once (`send` asks for every unkeyed record).
        let parts = self.partitions_for_topic(topic);
        let mut ids = Vec::with_capacity(parts.len());
        ids.extend(
            parts
                .iter()
                .filter(|p| p.leader_id >= 0 && self.nodes_by_id.contains_key(&p.leader_id))
                .map(|p| p.partition),
        );
        ids
    }
    /// The cached leader epoch, None when unknown (-1) or the partition is unknown.
    pub fn leader_epoch_for(&self, topic: &str, partition: i32) -> Option<i32> {
        self.partition(topic, partition)
            .map(|p| p.leader_epoch)
            .filter(|e| *e >= 0)
    }

    /// Copy of this snapshot with new leaders for some cached partitions
    /// (`(topic, partition, leader_id, leader_epoch)`) and `nodes` added or
    /// replacing the nodes of the same id. Topics not touched are shared.
    pub(crate) fn with_leaders(
        &self,
        updates: &[(Arc<str>, i32, i32, i32)],
        nodes: &[Node],
    ) -> Cluster {
        let mut copy = self.clone();
        for n in nodes {
            match copy.nodes.iter_mut().find(|m| m.id == n.id) {
                Some(m) => *m = n.clone(),
                None => copy.nodes.push(n.clone()),
            }
            copy.nodes_by_id.insert(n.id, n.clone());
        }
        for (topic, partition, leader, epoch) in updates {
            if let Some(st) = copy.topics.get_mut(&**topic) {
                let st = Arc::make_mut(st);
                if let Some(p) = st.partitions.iter_mut().find(|p| p.partition == *partition) {
                    p.leader_id = *leader;
                    p.leader_epoch = *epoch;
                }
            }
        }
        copy
    }

    /// Copy of this snapshot with one partition's leader set to unknown (-1),
    /// keeping its epoch. None if the partition is not cached or already
    /// leaderless. Costs O(topics + that topic's partitions), not O(cluster).
    pub(crate) fn with_leader_unknown(&self, topic: &str, partition: i32) -> Option<Cluster> {
        let state = self.topics.get(topic)?;
        let idx = state
            .partitions
            .iter()
            .position(|p| p.partition == partition)?;
        if state.partitions[idx].leader_id < 0 {
            return None;
        }
        let mut copy = self.clone();
        let st = copy.topics.get_mut(topic).expect("topic present");
        Arc::make_mut(st).partitions[idx].leader_id = -1;
        Some(copy)
    }
}
