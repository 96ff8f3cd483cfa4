#!/usr/bin/env bash
# Authorization benchmark (issue "Authorization and quotas": produce and
# consume with the authorizer on and 1,000 ACLs loaded >= 0.95x without).
# Builds kbroker and kbench and, in one invocation, runs the comparison
# against a kbroker that kbench starts for each run (embedded single node,
# RF 1, acks=1, 1 KiB records, 6 partitions), RUNS pairs, alternating which
# goes first:
#   --acls 1000: Kafka's ACL authorizer on (kafka.security.authorizer.
#     AclAuthorizer, allow.everyone.if.no.acl.found=false) with 1,000 ACLs
#     that do not match the workload (other principals' literal and
#     prefixed ACLs on other topics, groups and transactional ids, DENYs,
#     one-host entries, monitoring's Describe on "*") plus the 6 it needs
#     (Create, DescribeConfigs, Describe, Write, Read, Delete on its topic),
#     created through kadm before the workload
#   --acls -1: no authorizer
# The producer and consumer are User:ANONYMOUS on PLAINTEXT and not a
# super user, so every request is looked up among the ACLs; the ACLs are
# created as the only super user, a PLAIN admin on a SASL_PLAINTEXT
# listener that both arms' brokers serve, so the arms differ only in the
# authorizer and its ACLs. The table gives the medians, each run's ratio
# (#N) and the median of the paired runs' ratios, which is the figure to
# read on a noisy machine; broker CPU seconds per GB of record values moved
# (from /proc, 10 ms resolution) and peak RSS stand beside throughput.
#
# Environment: RUNS (default 5), RECORDS (default 200000), ACLS (default
# 1000), JSON=1 for machine-readable output, KBROKER=path to use an already
# built broker binary instead of building ./cmd/kbroker. Extra arguments are
# passed to kbench (e.g. --security sasl_ssl: the clients as the SCRAM user
# over TLS on both arms).
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
RECORDS=${RECORDS:-200000}
ACLS=${ACLS:-1000}

. scripts/bench-build.sh

common=(--kbroker "$kbroker" --runs "$RUNS" --records "$RECORDS" --record-size 1024
	--partitions 6 --acks 1)
if [[ "${JSON:-0}" == 1 ]]; then
	common+=(--json)
fi

say "== produce and consume with the ACL authorizer and $ACLS ACLs / without an authorizer"
"$bin/kbench" "${common[@]}" --acls "$ACLS" --vs-variant "--acls -1" "$@"
