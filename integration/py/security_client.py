# A producer and a consumer-group member of one Python client library
# through a secured listener, run by integration/security_clients_test.go:
#
#   python3 security_client.py LIB ADDR TOPIC GROUP N PREFIX
#
# LIB is kafka-python or confluent (confluent-kafka-python, librdkafka).
# The security settings come from the environment, so that the password is
# on no command line:
#
#   KB_PROTOCOL   SSL, SASL_PLAINTEXT or SASL_SSL
#   KB_MECHANISM  PLAIN, SCRAM-SHA-512 or OAUTHBEARER (SASL_* only)
#   KB_USER, KB_PASSWORD
#   KB_TOKEN      the OAUTHBEARER token (kafka-python; librdkafka makes its
#                 own unsecured one for KB_USER)
#   KB_CA         the CA certificate (PEM) that signed the broker's
#   KB_CERT, KB_KEY  the client certificate and key (PEM), if any
#
# Produces N records "PREFIX-<i>" (key = value) to TOPIC, each acknowledged
# by the broker (acks=all), prints PRODUCED; then consumes TOPIC from the
# start in group GROUP without auto-commit, printing "R <value>" for each
# record until it has N, commits synchronously, closes (leaving the group)
# and prints DONE. Nothing secret is printed.
import os
import sys

lib, addr, topic, group, n, prefix = sys.argv[1:7]
n = int(n)
env = os.environ
protocol = env['KB_PROTOCOL']
mechanism = env.get('KB_MECHANISM', '')
values = ['%s-%d' % (prefix, i) for i in range(n)]


class TokenProvider:
    # kafka-python's AbstractTokenProvider shape: token() and extensions().
    def __init__(self, token):
        self._token = token

    def token(self):
        return self._token

    def extensions(self):
        return {'traceId': 'kafka-python'}


def kafka_python():
    from kafka import KafkaConsumer, KafkaProducer

    sec = {'bootstrap_servers': addr, 'security_protocol': protocol}
    if mechanism == 'OAUTHBEARER':
        sec.update(sasl_mechanism=mechanism, sasl_oauth_token_provider=TokenProvider(env['KB_TOKEN']))
    elif protocol.startswith('SASL_'):
        sec.update(sasl_mechanism=mechanism, sasl_plain_username=env['KB_USER'],
                   sasl_plain_password=env['KB_PASSWORD'])
    if protocol.endswith('SSL'):
        sec.update(ssl_cafile=env['KB_CA'], ssl_check_hostname=True)
        if env.get('KB_CERT'):
            sec.update(ssl_certfile=env['KB_CERT'], ssl_keyfile=env['KB_KEY'])

    p = KafkaProducer(acks='all', linger_ms=5, **sec)
    futures = [p.send(topic, key=v.encode(), value=v.encode()) for v in values]
    for f in futures:
        f.get(timeout=30)
    p.close(timeout=30)
    print('PRODUCED', flush=True)

    c = KafkaConsumer(topic, group_id=group, auto_offset_reset='earliest',
                      enable_auto_commit=False, fetch_max_wait_ms=200, **sec)
    got = 0
    while got < n:
        for tp, recs in c.poll(timeout_ms=500).items():
            for r in recs:
                print('R', r.value.decode(), flush=True)
                got += 1
    c.commit()
    c.close(autocommit=False)


def confluent():
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

    sec = {'bootstrap.servers': addr, 'security.protocol': protocol}
    if mechanism == 'OAUTHBEARER':
        # librdkafka makes the unsecured JWT itself.
        sec.update({'sasl.mechanisms': mechanism, 'enable.sasl.oauthbearer.unsecure.jwt': True,
                    'sasl.oauthbearer.config': 'principal=%s scope=kafka extension_traceId=confluent' % env['KB_USER']})
    elif protocol.startswith('SASL_'):
        sec.update({'sasl.mechanisms': mechanism, 'sasl.username': env['KB_USER'],
                    'sasl.password': env['KB_PASSWORD']})
    if protocol.endswith('SSL'):
        sec.update({'ssl.ca.location': env['KB_CA'],
                    'ssl.endpoint.identification.algorithm': 'https'})
        if env.get('KB_CERT'):
            sec.update({'ssl.certificate.location': env['KB_CERT'],
                        'ssl.key.location': env['KB_KEY']})

    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)

    def client_error(err):
        # librdkafka retries a refused login until the message timeout;
        # stop at once (confluent-kafka re-raises this from poll/flush).
        if err.code() == KafkaError._AUTHENTICATION or err.fatal():
            raise KafkaException(err)

    sec['error_cb'] = client_error
    p = Producer(dict(sec, **{'acks': 'all', 'linger.ms': 5, 'message.timeout.ms': 30000}))
    for v in values:
        p.produce(topic, key=v.encode(), value=v.encode(), on_delivery=delivered)
    if p.flush(30) != 0:
        sys.exit('records still undelivered after 30s')
    if errors:
        sys.exit('delivery failed: %s' % errors[0])
    print('PRODUCED', flush=True)

    c = Consumer(dict(sec, **{'group.id': group, 'auto.offset.reset': 'earliest',
                              'enable.auto.commit': False, 'fetch.wait.max.ms': 200}))
    c.subscribe([topic])
    got = 0
    while got < n:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise KafkaException(m.error())
        print('R', m.value().decode(), flush=True)
        got += 1
    c.commit(asynchronous=False)
    c.close()


{'kafka-python': kafka_python, 'confluent': confluent}[lib]()
print('DONE', flush=True)
