// A kafkajs 2.2.4 producer and consumer-group member through a secured
// listener, run by integration/security_clients_test.go:
//
//   node security_client.js ADDR TOPIC GROUP N PREFIX
//
// The security settings come from the environment, so that the password is
// on no command line:
//
//   KB_PROTOCOL   SSL, SASL_PLAINTEXT or SASL_SSL
//   KB_MECHANISM  PLAIN, SCRAM-SHA-512 or OAUTHBEARER (SASL_* only)
//   KB_USER, KB_PASSWORD
//   KB_TOKEN      the OAUTHBEARER token
//   KB_CA         the CA certificate (PEM) that signed the broker's
//   KB_CERT, KB_KEY  the client certificate and key (PEM), if any
//
// Produces N records "PREFIX-<i>" (key = value) to TOPIC with acks=all,
// prints PRODUCED; then consumes TOPIC from the start in group GROUP without
// auto-commit, printing "R <value>" for each record until it has N, commits
// the offsets after the last record of each partition, disconnects (leaving
// the group) and prints DONE. Nothing secret is printed.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [addr, topic, groupId, nArg, prefix] = process.argv.slice(2)
const n = Number(nArg)
const env = process.env
const protocol = env.KB_PROTOCOL

// kafkajs logs to stdout by default; keep stdout for records.
const logCreator = () => ({ namespace, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

const config = {
  clientId: 'security-js',
  brokers: [addr],
  logLevel: logLevel.WARN,
  logCreator,
  retry: { retries: 10, initialRetryTime: 100 },
}
if (protocol.endsWith('SSL')) {
  config.ssl = { ca: [fs.readFileSync(env.KB_CA, 'utf8')], rejectUnauthorized: true }
  if (env.KB_CERT) {
    config.ssl.cert = fs.readFileSync(env.KB_CERT, 'utf8')
    config.ssl.key = fs.readFileSync(env.KB_KEY, 'utf8')
  }
}
if (env.KB_MECHANISM === 'OAUTHBEARER') {
  config.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: env.KB_TOKEN }) }
} else if (protocol.startsWith('SASL_')) {
  config.sasl = { mechanism: env.KB_MECHANISM.toLowerCase(), username: env.KB_USER, password: env.KB_PASSWORD }
}
const kafka = new Kafka(config)

async function main () {
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const messages = []
  for (let i = 0; i < n; i++) {
    const v = `${prefix}-${i}`
    messages.push({ key: v, value: v })
  }
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()
  console.log('PRODUCED')

  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const last = new Map() // partition -> offset of the last record consumed
  let got = 0
  await new Promise((resolve, reject) => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (got >= n) return
        console.log(`R ${message.value.toString()}`)
        last.set(partition, BigInt(message.offset))
        got++
        if (got === n) {
          const offsets = [...last].map(([p, o]) => ({ topic, partition: p, offset: String(o + 1n) }))
          consumer.commitOffsets(offsets).then(resolve, reject)
        }
      },
    }).catch(reject)
  })
  await consumer.disconnect()
  console.log('DONE')
}

main().catch(err => {
  process.stderr.write(`FAILED ${err.stack || err}\n`)
  process.exit(1)
})
