"""The spec's status rules that read what a cluster reported (pure, no database, no clock):

- `observed`: a Task's phase, ready count and message from its workload and pods (spec §Task
  status, through `jobs.lifecycle.task_phase`), an add-on's phase and version (§Node and Addon
  status), the GPUs a pod holds on its node;
- `problems`: what a Worker row and a Task message say about a pod (§Pod and Worker status), and
  the known problems the troubleshooting panel and the dashboard share.

The rules over the console's own rows — Job and Workflow phases, transitions, what blocks a
Workflow child — are in `jobs.lifecycle`.
"""
