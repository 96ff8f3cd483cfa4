// A kafkajs 2.2.4 consumer-group member, run by integration/groups_test.go:
//
//   node groups_member.js ADDR TOPIC GROUP CLIENT_ID COMMIT_MS SESSION_MS HEARTBEAT_MS REBALANCE_MS MAXWAIT_MS
//
// Prints "R <partition> <offset> <value>" for each record (stdout writes to
// a pipe are synchronous on Linux, so a SIGKILL loses no printed line) before
// kafkajs may commit it (autoCommit resolves an offset after eachMessage
// returns). On SIGTERM it disconnects (LeaveGroup) and prints CLOSED.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [addr, topic, groupId, clientId, commitMs, sessionMs, heartbeatMs, rebalanceMs, maxWaitMs] =
  process.argv.slice(2)

// kafkajs logs to stdout by default; keep stdout for records.
const logCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

const kafka = new Kafka({
  clientId,
  brokers: [addr],
  logLevel: logLevel.INFO,
  logCreator,
  retry: { retries: 10, initialRetryTime: 100 },
})

const consumer = kafka.consumer({
  groupId,
  sessionTimeout: Number(sessionMs),
  heartbeatInterval: Number(heartbeatMs),
  rebalanceTimeout: Number(rebalanceMs),
  maxWaitTimeInMs: Number(maxWaitMs),
})

let stopping = false
process.on('SIGTERM', async () => {
  if (stopping) return
  stopping = true
  try {
    await consumer.disconnect()
  } catch (e) {
    process.stderr.write(`disconnect: ${e}\n`)
    process.exit(1)
  }
  process.stdout.write('CLOSED\n')
  process.exit(0)
})

const main = async () => {
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: true,
    autoCommitInterval: Number(commitMs),
    eachMessage: async ({ partition, message }) => {
      process.stdout.write(`R ${partition} ${message.offset} ${message.value.toString()}\n`)
    },
  })
}

consumer.on(consumer.events.CRASH, e => {
  process.stderr.write(`consumer crashed: ${e.payload.error}\n`)
})

main().catch(e => {
  process.stderr.write(`kafkajs member failed: ${e.stack || e}\n`)
  process.exit(1)
})
