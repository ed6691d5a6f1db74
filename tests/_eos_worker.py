"""A consume-transform-produce worker for tests/test_transactions.py's
exactly-once test; run as ``python _eos_worker.py BOOTSTRAP IN OUT GROUP TID PARTITIONS``.

Reads IN with read_committed from the group's committed offsets, writes each
value upper-cased to OUT and commits the consumed offsets in the same
transaction (send_offsets_to_transaction), a few hundred records per
transaction. Prints "ready" once its transactional id is registered (which
aborts a killed predecessor's open transaction), "committed" after each
transaction (so the test can kill it mid-work, however fast it runs) and
"done" when every partition's committed offset has reached its end offset.
"""

from __future__ import annotations

import sys

import ferrokafka as fk


def main() -> int:
    bs, src, dst, group, tid, parts = sys.argv[1:7]
    tps = [fk.TopicPartition(src, p) for p in range(int(parts))]
    c = fk.Consumer(bs, group_id=group, isolation_level="read_committed",
                    enable_auto_commit=False, auto_offset_reset="earliest")
    c.assign(tps)
    committed = c.committed(tps)
    for tp in tps:
        o = committed.get(tp)
        if o is not None:
            c.seek(tp, o.offset)
        else:
            c.seek_to_beginning([tp])
    p = fk.Producer(bs, transactional_id=tid)
    p.init_transactions(30)
    print("ready", flush=True)
    end = c.end_offsets(tps)
    meta = c.group_metadata()
    while True:
        records = c.poll(timeout_ms=200, max_records=300)
        if not records:
            if all(c.position(tp) >= end[tp] for tp in tps):
                break
            continue
        p.begin_transaction()
        last = {}
        for m in records:
            p.send(dst, m.value.upper(), key=m.key)
            last[fk.TopicPartition(m.topic, m.partition)] = m.offset + 1
        p.send_offsets_to_transaction(last, meta)
        p.commit_transaction(30)
        print("committed", flush=True)
    p.close()
    c.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
