// kafkajs 2.2.4 admin reassignment calls, run by integration/reassign_test.go:
//
//   node reassign_admin.js ADDR alter TOPIC PARTITION REPLICAS
//   node reassign_admin.js ADDR list TOPIC PARTITION
//
// alter sends AlterPartitionReassignments for one partition (REPLICAS
// comma-separated broker ids) and prints OK; list prints one line per
// ongoing reassignment of TOPIC's PARTITION, "REASSIGNING <topic>
// <partition> <replicas> <adding> <removing>" (comma-separated ids, "-"
// for none), then OK. Errors go to stderr with a non-zero exit.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [addr, mode, topic, partition, replicas] = process.argv.slice(2)

// kafkajs logs to stdout by default; keep stdout for results.
const logCreator = () => ({ namespace, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

const kafka = new Kafka({
  clientId: 'reassign-js',
  brokers: [addr],
  logLevel: logLevel.WARN,
  logCreator,
  retry: { retries: 10, initialRetryTime: 100 },
})

const ids = (l) => (l && l.length ? l.join(',') : '-')

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  try {
    switch (mode) {
      case 'alter':
        await admin.alterPartitionReassignments({
          topics: [{ topic, partitionAssignment: [{ partition: Number(partition), replicas: replicas.split(',').map(Number) }] }],
        })
        break
      case 'list': {
        const res = await admin.listPartitionReassignments({ topics: [{ topic, partitions: [Number(partition)] }] })
        for (const t of res.topics) {
          for (const p of t.partitions) {
            console.log(['REASSIGNING', t.name, p.partition, ids(p.replicas), ids(p.addingReplicas), ids(p.removingReplicas)].join(' '))
          }
        }
        break
      }
      default:
        throw new Error(`unknown mode ${mode}`)
    }
    console.log('OK')
  } finally {
    await admin.disconnect()
  }
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`)
  process.exit(1)
})
