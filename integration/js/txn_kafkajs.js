// A kafkajs 2.2.4 transactional producer with sendOffsets and a
// read_committed consumer, run by integration/txn_clients_test.go:
//
//   node txn_kafkajs.js ADDR TOPIC TXN_ID N PER_TXN GROUP
//
// Runs N transactions of PER_TXN records on TOPIC (even ones committed, odd
// ones aborted; the records of transaction i are "js-i-j"), each also
// committing offset i+1 of partition 0 of TOPIC for group GROUP-offsets
// with sendOffsets. Then consumes TOPIC read_committed in group GROUP from
// the start, printing "R <value>" for each record until it has the
// committed ones, prints "OFFSET <committed offset of GROUP-offsets>" and
// DONE.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [addr, topic, transactionalId, nArg, perTxnArg, groupId] = process.argv.slice(2)
const n = Number(nArg)
const perTxn = Number(perTxnArg)

const logCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

const kafka = new Kafka({ clientId: 'txn-js', brokers: [addr], logLevel: logLevel.WARN, logCreator,
  retry: { retries: 10, initialRetryTime: 100 } })

async function main () {
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  for (let i = 0; i < n; i++) {
    const txn = await producer.transaction()
    const messages = []
    for (let j = 0; j < perTxn; j++) {
      const v = `js-${i}-${j}`
      messages.push({ key: v, value: v, partition: 0 })
    }
    await txn.send({ topic, messages })
    await txn.sendOffsets({ consumerGroupId: `${groupId}-offsets`, topics: [{ topic, partitions: [{ partition: 0, offset: String(i + 1) }] }] })
    if (i % 2 === 0) {
      await txn.commit()
    } else {
      await txn.abort()
    }
  }
  await producer.disconnect()
  console.log('PRODUCED')

  const want = Math.floor((n + 1) / 2) * perTxn
  let got = 0
  const consumer = kafka.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        console.log(`R ${message.value.toString()}`)
        got++
        if (got === want) resolve()
      }
    }).catch(reject)
  })
  await consumer.disconnect()

  const admin = kafka.admin()
  await admin.connect()
  const offsets = await admin.fetchOffsets({ groupId: `${groupId}-offsets`, topics: [topic] })
  console.log(`OFFSET ${offsets[0].partitions.find(p => p.partition === 0).offset}`)
  await admin.disconnect()
  console.log('DONE')
}

main().catch(err => {
  process.stderr.write(`FAILED ${err.stack || err}\n`)
  process.exit(1)
})
