# A librdkafka (python3-confluent-kafka) transactional producer that opens
# a transaction and never ends it, run by integration/txn_clients_test.go:
#
#   python3 txn_hang.py ADDR TOPIC TXN_ID N TIMEOUT_MS
#
# Writes N records ("hang-<i>") in a transaction with transaction.timeout.ms
# TIMEOUT_MS, waits for their delivery, prints OPEN, then blocks reading
# stdin until the test kills it.
import sys

from confluent_kafka import Producer

addr, topic, txn_id, n, timeout_ms = sys.argv[1:6]
p = Producer({'bootstrap.servers': addr, 'transactional.id': txn_id,
              'transaction.timeout.ms': int(timeout_ms), 'enable.idempotence': True})
p.init_transactions(30)
p.begin_transaction()
for i in range(int(n)):
    v = 'hang-%d' % i
    p.produce(topic, key=v.encode(), value=v.encode())
if p.flush(30) != 0:
    sys.exit('records not delivered')
print('OPEN', flush=True)
sys.stdin.read()
