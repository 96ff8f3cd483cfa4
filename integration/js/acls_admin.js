// kafkajs 2.2.4 admin ACL calls, run by integration/acls_admin_test.go:
//
//   node acls_admin.js ADDR create PRINCIPAL PREFIX
//   node acls_admin.js ADDR describe PRINCIPAL
//   node acls_admin.js ADDR delete PRINCIPAL
//
// create makes three ACLs for PRINCIPAL (kafkajs sends CreateAcls v1 to
// the controller): Read on the literal topic PREFIX-orders, Read on the
// groups prefixed PREFIX-, and a Write denied on the literal topic
// PREFIX-orders from 10.0.0.1; it prints OK.
// describe prints one line per ACL of PRINCIPAL (DescribeAcls v1, filter
// ANY/ANY), "ACL <type> <name> <pattern> <principal> <host> <op> <perm>"
// with kafkajs's numeric codes, then OK.
// delete removes every ACL of PRINCIPAL (DeleteAcls v1) and prints one
// "DELETED ..." line per matching ACL (same fields), then OK.
'use strict'

const {
  Kafka, logLevel, AclResourceTypes, AclOperationTypes, AclPermissionTypes, ResourcePatternTypes,
} = require('kafkajs')

const [addr, mode, principal, prefix] = process.argv.slice(2)

// kafkajs logs to stdout by default; keep stdout for results.
const logCreator = () => ({ namespace, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

const kafka = new Kafka({
  clientId: 'acls-js',
  brokers: [addr],
  logLevel: logLevel.WARN,
  logCreator,
  retry: { retries: 10, initialRetryTime: 100 },
})

const anyOfPrincipal = {
  resourceType: AclResourceTypes.ANY,
  resourcePatternType: ResourcePatternTypes.ANY,
  principal,
  operation: AclOperationTypes.ANY,
  permissionType: AclPermissionTypes.ANY,
}

function line (tag, r, a) {
  return [tag, r.resourceType, r.resourceName, r.resourcePatternType, a.principal, a.host, a.operation, a.permissionType].join(' ')
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  try {
    switch (mode) {
      case 'create':
        await admin.createAcls({
          acl: [
            {
              resourceType: AclResourceTypes.TOPIC, resourceName: `${prefix}-orders`, resourcePatternType: ResourcePatternTypes.LITERAL,
              principal, host: '*', operation: AclOperationTypes.READ, permissionType: AclPermissionTypes.ALLOW,
            },
            {
              resourceType: AclResourceTypes.GROUP, resourceName: `${prefix}-`, resourcePatternType: ResourcePatternTypes.PREFIXED,
              principal, host: '*', operation: AclOperationTypes.READ, permissionType: AclPermissionTypes.ALLOW,
            },
            {
              resourceType: AclResourceTypes.TOPIC, resourceName: `${prefix}-orders`, resourcePatternType: ResourcePatternTypes.LITERAL,
              principal, host: '10.0.0.1', operation: AclOperationTypes.WRITE, permissionType: AclPermissionTypes.DENY,
            },
          ],
        })
        break
      case 'describe': {
        const { resources } = await admin.describeAcls(anyOfPrincipal)
        for (const r of resources) {
          for (const a of r.acls) {
            console.log(line('ACL', r, a))
          }
        }
        break
      }
      case 'delete': {
        const { filterResponses } = await admin.deleteAcls({ filters: [anyOfPrincipal] })
        for (const f of filterResponses) {
          if (f.errorCode !== 0) {
            throw new Error(`filter error ${f.errorCode}: ${f.errorMessage}`)
          }
          for (const m of f.matchingAcls) {
            if (m.errorCode !== 0) {
              throw new Error(`matching ACL error ${m.errorCode}: ${m.errorMessage}`)
            }
            console.log(line('DELETED', m, m))
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

main().catch(err => {
  process.stderr.write(`acls_admin.js: ${err.stack || err}\n`)
  process.exit(1)
})
