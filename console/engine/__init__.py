"""The engine: what keeps the database and the clusters in step. Only tasks, commands and tests
import it, and `jobs.pod_logs` for the one read on demand (`logs`); it is the only caller of
`console.kube` (tests/test_imports.py holds both).

One cycle of one cluster (`cycle.sync_cluster`) reads top to bottom in `cycle`; its larger steps
have a module each, beside what they share and the work around a cycle:

- `streams`: what is read from a cluster — one resource under one selector each;
- `observe`: what changed since the last cycle — a bounded WATCH per stream from its cursor, or
  a relist compared with what is stored — as `Change`s;
- `observed`: the cluster's objects as last reported (ObservedObject rows), what the changes
  touch, and the touched part loaded and parsed;
- `rows`: the touched Jobs, Tasks, Workers, pod instances, Nodes and add-ons, typed;
- `plan`: the writes that make the cluster hold what a Job asks for, from the loaded rows, the
  observations and three settings (no query, no API call);
- `apply`: performs a plan, records the applied layer and the Operations' results;
- `derive`: the observed layer — the spec's status rules applied to the loaded rows;
- `write`: the derived changes written in one transaction;
- `cycle`: the lease, the order of the steps, the cursors, the cycle's figures;
- `one_job`: one Job reconciled on demand, right after an operation; the gateway of a Cluster;
- `stored`: observations as ObservedObject keeps them, read back without parsing again;
- `completions`: completions read from changed pods' termination messages after a cycle;
- `log_progress`: progress read from RLinf's log lines, on its own beat entry;
- `live_reads`: a pod's log tail and Events, read while a reader waits, never stored.

The statements that write many rows at once, which `write` uses, are `console.bulk` (other
apps' writers use them too).
"""
