# A librdkafka (python3-confluent-kafka) transactional producer and
# read_committed consumer, run by integration/txn_clients_test.go:
#
#   python3 txn_confluent.py ADDR TOPIC TXN_ID N PER_TXN GROUP
#
# Runs N transactions of PER_TXN records on TOPIC (even ones committed, odd
# ones aborted; the records of transaction i are "lr-i-j"), then consumes
# TOPIC read_committed in group GROUP from the start, printing "R <value>"
# for each record until it has the committed ones, and prints DONE.
import sys

from confluent_kafka import Consumer, KafkaException, Producer

addr, topic, txn_id, n, per_txn, group = sys.argv[1:7]
n, per_txn = int(n), int(per_txn)

p = Producer({'bootstrap.servers': addr, 'transactional.id': txn_id,
              'transaction.timeout.ms': 30000, 'enable.idempotence': True})
p.init_transactions(30)
for i in range(n):
    p.begin_transaction()
    for j in range(per_txn):
        v = 'lr-%d-%d' % (i, j)
        p.produce(topic, key=v.encode(), value=v.encode())
    p.flush(30)
    if i % 2 == 0:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
print('PRODUCED', flush=True)

want = ((n + 1) // 2) * per_txn
c = Consumer({'bootstrap.servers': addr, 'group.id': group, 'auto.offset.reset': 'earliest',
              'isolation.level': 'read_committed', 'enable.auto.commit': False})
c.subscribe([topic])
got = 0
while got < want:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        raise KafkaException(m.error())
    print('R', m.value().decode(), flush=True)
    got += 1
c.close()
print('DONE', flush=True)
